package manifest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// ownerFixture: the fixture plus a streaming node owning the test
// VChannel's PChannel at term 2 and one Growing segment it may publish
// inline (SaveBinlogPaths with manifest_path).
type ownerFixture struct {
	*fixture
	clock *clockwork.FakeClock
	node  uint64
	seg   int64
}

func newOwnerFixture(t *testing.T) *ownerFixture {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Now())
	f := newFixture(t, Config{Clock: clock, GCGrace: time.Minute})
	p0 := vocab.PChannelName("dml", 0)
	f.l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "127.0.0.1:1", Incarnation: "i1"})
	node := uint64(0)
	for id := uint64(1); id < 10; id++ {
		if _, ok := f.l.State().StreamingNode(id); ok {
			node = id
		}
	}
	f.l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: p0, NodeId: node, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: 1}}})
	f.l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: p0, Term: 2}}})
	cres := f.l.MustPropose(t, &logpb.CreateSegment{CollectionId: testColl, PartitionId: 1, Vchannel: testVChannel, NodeId: node, PchannelTerm: 2})
	return &ownerFixture{fixture: f, clock: clock, node: node, seg: cres.GetSegments().GetIds()[0]}
}

func (o *ownerFixture) saveBody(p commands.ManifestPointer) *logpb.SaveBinlogPaths {
	return &logpb.SaveBinlogPaths{NodeId: o.node, Vchannel: testVChannel, PchannelTerm: 2, SegmentId: o.seg,
		CollectionId: testColl, PartitionId: 1, Level: logpb.SegmentLevel_LEVEL_L1, ManifestPath: p.String(), StorageVersion: 3}
}

// inline publishes p with SaveBinlogPaths and returns Apply's answer.
func (o *ownerFixture) inline(p commands.ManifestPointer) *logpb.Result {
	o.t.Helper()
	res, err := commands.Propose(context.Background(), o.l, o.saveBody(p), "")
	if err != nil {
		o.t.Fatalf("propose inline %s: %v", p, err)
	}
	return res
}

func (o *ownerFixture) write(p commands.ManifestPointer) {
	o.t.Helper()
	if err := o.store.Create(context.Background(), p.Key(), []byte("a revision written by the owner")); err != nil {
		o.t.Fatal(err)
	}
}

// checkPointerReadable: the segment's pointer names an object that exists.
func (o *ownerFixture) checkPointerReadable(rep GCReport) {
	o.t.Helper()
	p, _, _ := o.l.State().ManifestPointer(o.seg)
	if p.IsZero() {
		return
	}
	if _, err := o.store.Get(context.Background(), p.Key()); err != nil {
		o.t.Errorf("segment %d publishes %s, which is gone (the collector removed %v): %v", o.seg, p.Key(), rep.Removed, err)
	}
}

// Issue #20 M1, a delayed inline publication: the owner writes manifest-2, its inline
// publication is delayed past the grace period, the collector runs, and
// then the publication arrives. On the old collector the publication was
// accepted after the revision had been deleted; now the collector's
// retirement commits first and the late publication is refused.
func TestAuditGCDeletesRevisionPublishedLater(t *testing.T) {
	o := newOwnerFixture(t)
	ctx := context.Background()
	base := commands.ManifestBase(testColl, 1, o.seg)
	v1, v2 := commands.ManifestPointer{Base: base, Version: 1}, commands.ManifestPointer{Base: base, Version: 2}
	o.write(v1)
	if res := o.inline(v1); res.Rejection != nil {
		t.Fatalf("publish version 1: %v", res.Rejection)
	}
	o.write(v2)
	o.clock.Advance(2 * time.Minute) // the owner's publication is delayed past the grace
	rep, err := o.c.CollectOrphans(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	res := o.inline(v2)
	o.checkPointerReadable(rep)
	if slices.Contains(rep.Removed, v2.Key()) && res.Rejection.GetCode() != logpb.RejectCode_REJECT_INVALID {
		t.Errorf("publication of the collected %s answered %v, want invalid", v2.Key(), res)
	}
	// The owner writes a newer revision, which publishes.
	v3 := commands.ManifestPointer{Base: base, Version: 3}
	o.write(v3)
	if res := o.inline(v3); res.Rejection != nil {
		t.Fatalf("publish version 3 after the collection: %v", res.Rejection)
	}
	o.checkPointerReadable(rep)
}

// Issue #20 M2, a base judged by its path: a pointer at a base whose path names another
// (absent) segment. The collector attributed revisions by the segment ID
// in the path and deleted the published one. Such a pointer is now
// refused (a segment publishes only at its own base), and the collector
// attributes every base by the pointers in the state.
func TestAuditGCJudgesBaseBySegmentInPath(t *testing.T) {
	o := newOwnerFixture(t)
	ctx := context.Background()
	p := commands.ManifestPointer{Base: commands.ManifestBase(testColl, 1, 777), Version: 1} // no segment 777
	o.write(p)
	res := o.inline(p)
	o.clock.Advance(2 * time.Minute)
	rep, err := o.c.CollectOrphans(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	o.checkPointerReadable(rep)
	if res.Rejection.GetCode() != logpb.RejectCode_REJECT_INVALID {
		t.Errorf("a pointer at another segment's base answered %v, want invalid", res)
	}
}

// A publication that commits while a pass is running (between its
// listing and its retirement) makes Apply keep that base: nothing the
// pointer names is deleted.
func TestGCRetirementLosesToAConcurrentPublication(t *testing.T) {
	o := newOwnerFixture(t)
	ctx := context.Background()
	base := commands.ManifestBase(testColl, 1, o.seg)
	v1 := commands.ManifestPointer{Base: base, Version: 1}
	o.write(v1)
	o.clock.Advance(2 * time.Minute)
	o.l.SetBeforeNextApply(func(body proto.Message) bool {
		if _, ok := body.(*logpb.RetireManifestRevisions); !ok {
			return false
		}
		if res := o.inline(v1); res.Rejection != nil {
			t.Errorf("publish during the pass: %v", res.Rejection)
		}
		return true
	})
	rep, err := o.c.CollectOrphans(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 0 {
		t.Errorf("the pass removed %v although version 1 was published before its retirement applied", rep.Removed)
	}
	o.checkPointerReadable(rep)
}

// A deposed leader's pass (its decision term is older than the newest
// established leader's) is refused as a whole and deletes nothing; the
// new leader's publication of the revision stands.
func TestGCDeposedLeaderPassDeletesNothing(t *testing.T) {
	o := newOwnerFixture(t)
	ctx := context.Background()
	base := commands.ManifestBase(testColl, 1, o.seg)
	v1 := commands.ManifestPointer{Base: base, Version: 1}
	o.write(v1)
	o.clock.Advance(2 * time.Minute)
	old := o.l.State() // the deposed leader's view: version 1 unpublished
	o.l.Establish(t, 2)
	if res := o.inline(v1); res.Rejection != nil {
		t.Fatalf("the new leader publishes version 1: %v", res.Rejection)
	}
	o.l.SetRaftTerm(1) // the deposed leader's proposals carry its term
	deposed := New(staleLeader{Leader: o.l, st: old, term: 1}, Config{Store: o.store, Clock: o.clock, GCGrace: time.Minute})
	rep, err := deposed.CollectOrphans(ctx, false)
	if len(rep.Removed) != 0 {
		t.Errorf("a deposed leader's pass removed %v (err %v)", rep.Removed, err)
	}
	o.checkPointerReadable(rep)
}

// staleLeader is a deposed leader: it still believes it leads term and
// reads the state it had then; its proposals reach the real log.
type staleLeader struct {
	*controllertest.Leader
	st   *fsm.State
	term uint64
}

func (s staleLeader) State() *fsm.State       { return s.st }
func (s staleLeader) EstablishedTerm() uint64 { return s.term }
