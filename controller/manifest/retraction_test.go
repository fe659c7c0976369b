package manifest

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/objectstore"
)

// A leader that dies after deleting a retracted index's files and before
// its DropIndexes commit leaves the record and the entry published with
// their bytes gone; running the retraction again (it tolerates files that
// are already gone) retires both, and the revision the dead leader wrote
// is an orphan the collector may take.
func TestIndexRetractionCrashBetweenDeleteAndCommitIsFinishedByARerun(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	ctx := context.Background()
	idxFile := "index_files/40/1/1/5/0"
	if err := f.store.Put(ctx, idxFile, []byte("index bytes")); err != nil {
		t.Fatal(err)
	}
	entry := &coordpb.ManifestIndexEntry{BuildId: 40, IndexId: 41, FieldId: 101, Files: []string{idxFile}}
	if _, err := commitProto(ctx, f.c, &coordpb.CommitSegmentManifestRequest{SegmentId: 5,
		Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddIndexes{AddIndexes: &coordpb.AddIndexes{Indexes: []*coordpb.ManifestIndexEntry{entry}}}},
		Catalog:  &coordpb.CatalogMutation{IndexUpserts: []*coordpb.ManifestIndexEntry{entry}}}); err != nil {
		t.Fatal(err)
	}
	retract := &coordpb.CommitSegmentManifestRequest{SegmentId: 5,
		Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_DropIndexes{DropIndexes: &coordpb.DropIndexes{BuildIds: []int64{40}}}},
		Catalog:  &coordpb.CatalogMutation{IndexRemoves: []int64{40}}}
	f.l.SetBeforePropose(func(body proto.Message) error {
		if _, ok := body.(*logpb.CommitSegmentManifests); ok {
			return errTest // the leader dies here
		}
		return nil
	})
	if _, err := commitProto(ctx, f.c, proto.Clone(retract).(*coordpb.CommitSegmentManifestRequest)); !errors.Is(err, errTest) {
		t.Fatalf("retraction with a crash: %v", err)
	}
	if _, err := f.store.Get(ctx, idxFile); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("index file after the crash: %v (bytes go first)", err)
	}
	if len(f.l.State().SegmentIndexes(5)) != 1 || len(f.revision(5).Indexes) != 1 || f.version(5) != 2 {
		t.Fatal("the crashed retraction changed the published state")
	}
	f.l.SetBeforePropose(nil)
	resp, err := commitProto(ctx, f.c, proto.Clone(retract).(*coordpb.CommitSegmentManifestRequest))
	if err != nil {
		t.Fatalf("re-run of the retraction: %v", err)
	}
	if len(f.l.State().SegmentIndexes(5)) != 0 || len(f.revision(5).Indexes) != 0 || resp.Version != 4 {
		t.Fatalf("after the re-run: version %d, %d records, %d entries", resp.Version, len(f.l.State().SegmentIndexes(5)), len(f.revision(5).Indexes))
	}
}
