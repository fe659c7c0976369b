package manifest

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// A structured commit publishes only if the pointer is still the base it
// built on: here another publication (a prepared revision, proposed
// without the lock, as a deposed leader's late command or another writer
// would) moves the pointer between the commit's revision write and its
// command. Apply refuses the commit as stale, the other publication
// stands, the commit's mutation is in no published revision, and the
// revision it wrote is an orphan above the pointer.
func TestStructuredCommitIsRefusedWhenItsBaseMoved(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	ctx := context.Background()
	base := commands.ManifestBase(testColl, 1, 5)
	other := commands.ManifestPointer{Base: base, Version: 3}
	data, err := Encode(&coordpb.ManifestRevision{FormatVersion: FormatVersion, SegmentId: 5, Version: 3,
		Stats: []*coordpb.ManifestStatsEntry{{Key: "other", Files: []string{statsKey(5, "other")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Create(ctx, other.Key(), data); err != nil {
		t.Fatal(err)
	}
	f.l.SetBeforeNextApply(func(body proto.Message) bool {
		if _, ok := body.(*logpb.CommitSegmentManifests); !ok {
			return false
		}
		f.l.MustPropose(t, &logpb.CommitSegmentManifests{Publishes: []*logpb.ManifestPublish{{
			SegmentId: 5, Next: other.String(), Prepared: true}}})
		return true
	})
	_, err = commitProto(ctx, f.c, statsReq(5, "mine", "f"))
	var stale *StaleError
	if !errors.As(err, &stale) {
		t.Fatalf("commit over a moved base: %v, want stale", err)
	}
	if v := f.version(5); v != 3 {
		t.Fatalf("pointer at version %d, want the other publication's 3", v)
	}
	for _, s := range f.revision(5).Stats {
		if s.Key == "mine" {
			t.Fatal("the refused commit's mutation is published")
		}
	}
	if objs := f.objects(); len(objs) != 3 { // v1 (create), v2 (the refused commit's orphan), v3
		t.Fatalf("objects %v", objs)
	}
}
