package manifest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/vocab"
)

// The collector removes revisions above a segment's pointer and those of
// segments that do not exist, once older than the grace period; a dry run
// only lists them; young orphans, the published revision and the
// revisions below it are never touched.
func TestCollectOrphans(t *testing.T) { collectOrphans(t, nil) }

// collectOrphans runs TestCollectOrphans on store (a fresh directory when
// nil). The fake clock starts at the real time, so the objects' own
// modification times, the server's clock on S3, count as now.
func collectOrphans(t *testing.T, store objectstore.Store) {
	clock := clockwork.NewFakeClockAt(time.Now())
	f := newFixture(t, Config{Clock: clock, GCGrace: time.Minute, Store: store})
	f.create(5)
	ctx := context.Background()
	if _, err := commitProto(ctx, f.c, statsReq(5, "k", "f")); err != nil {
		t.Fatal(err)
	}
	base := commands.ManifestBase(testColl, 1, 5)
	published := commands.ManifestKey(base, 2)
	below := commands.ManifestKey(base, 1)
	orphan := commands.ManifestKey(base, 3)
	gone := commands.ManifestKey(commands.ManifestBase(testColl, 1, 77), 1) // no segment 77
	for _, k := range []string{orphan, gone} {
		if err := f.store.Create(ctx, k, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := f.c.CollectOrphans(ctx, false)
	if err != nil || rep.Young != 2 || len(rep.Found) != 0 {
		t.Fatalf("inside the grace period: %+v %v", rep, err)
	}
	clock.Advance(2 * time.Minute)
	rep, err = f.c.CollectOrphans(ctx, true)
	if err != nil || len(rep.Found) != 2 || len(rep.Removed) != 0 {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	if objs := f.objects(); !slices.Contains(objs, orphan) || !slices.Contains(objs, gone) {
		t.Fatalf("a dry run deleted something: %v", objs)
	}
	rep, err = f.c.CollectOrphans(ctx, false)
	if err != nil || len(rep.Removed) != 2 || !slices.Contains(rep.Removed, orphan) || !slices.Contains(rep.Removed, gone) {
		t.Fatalf("collection: %+v %v", rep, err)
	}
	objs := f.objects()
	if !slices.Equal(objs, []string{below, published}) {
		t.Fatalf("left %v, want only the published revision and the one below it", objs)
	}
	if rev := f.revision(5); rev.Version != 2 {
		t.Fatalf("published revision after the collection: %v", rev)
	}
	// A commit holding the segment's lock is never raced: its orphan-to-be
	// is left for a later pass. (Version 3 was retired by the pass above:
	// no pointer can ever name it, so it is deleted whatever the lock.)
	orphan = commands.ManifestKey(base, 4)
	if err := f.store.Create(ctx, orphan, []byte("x")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	if !f.c.locks.tryLock(5) {
		t.Fatal("lock 5")
	}
	rep, err = f.c.CollectOrphans(ctx, false)
	f.c.locks.unlock(5)
	if err != nil || len(rep.Removed) != 0 || !slices.Contains(f.objects(), orphan) {
		t.Fatalf("collected under a held lock: %+v %v", rep, err)
	}
}

// An Importing segment's revisions are its job's, not orphans: the
// collector keeps them until the job finishes (or the segment is dropped).
func TestCollectOrphansKeepsImportingSegments(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Now())
	f := newFixture(t, Config{Clock: clock, GCGrace: time.Minute})
	pc := vocab.PChannelName("dml", 0)
	f.l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "127.0.0.1:9001", Incarnation: "a"})
	f.l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: pc, NodeId: 1, ExpectedTerm: 1}}})
	f.l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: pc, Term: 2}}})
	res := f.l.MustPropose(t, &logpb.CreateImportSegment{CollectionId: testColl, PartitionId: 1, Vchannel: testVChannel,
		NodeId: 1, PchannelTerm: 2, Level: logpb.SegmentLevel_LEVEL_L1})
	seg := res.GetSegments().GetIds()[0]
	ctx := context.Background()
	key := commands.ManifestKey(commands.ManifestBase(testColl, 1, seg), 1)
	if err := f.store.Create(ctx, key, []byte("x")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	rep, err := f.c.CollectOrphans(ctx, false)
	if err != nil || len(rep.Found) != 0 || !slices.Contains(f.objects(), key) {
		t.Fatalf("collected an importing segment's revision: %+v %v", rep, err)
	}
	f.l.MustPropose(t, &logpb.DropVirtualChannels{CollectionId: testColl})
	rep, err = f.c.CollectOrphans(ctx, false)
	if err != nil || !slices.Contains(rep.Removed, key) {
		t.Fatalf("after the drop: %+v %v, want %s removed", rep, err, key)
	}
}
