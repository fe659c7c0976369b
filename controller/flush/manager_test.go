package flush

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/vocab"
)

func req(vch string, term int64, bytes uint64) AssignRequest {
	return AssignRequest{CollectionID: coll, PartitionID: 1, VChannel: vch, PChannelTerm: term, Rows: 1, Bytes: bytes}
}

// small: capacity ≈ 1000 × 1 × (1 - 0.1·frac) ∈ [900, 1000] bytes.
var small = Config{SegmentMaxSize: 1000, SealProportion: 1, SealProportionJitter: 0.1, AllocationExpiry: 2 * time.Second}

func TestAssignCreatesOnceAndFillsUp(t *testing.T) {
	m, l, clock := fixture(t, small)
	ctx := context.Background()
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 100)})
	if err != nil {
		t.Fatal(err)
	}
	if creates(l) != 1 {
		t.Fatalf("%d CreateSegment commands, want 1", creates(l))
	}
	if want := clock.Now().Add(2 * time.Second); !a[0].Expire.Equal(want) || a[0].ExpireTs != fsm.ComposeTS(want.UnixMilli()+1) {
		t.Fatalf("expiry %v / %d, want %v", a[0].Expire, a[0].ExpireTs, want)
	}
	// More room in the same segment: no new command.
	b, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 500), req(vch0, 2, 200)})
	if err != nil {
		t.Fatal(err)
	}
	if b[0].SegmentID != a[0].SegmentID || b[1].SegmentID != a[0].SegmentID || creates(l) != 1 {
		t.Fatalf("assignments %v after %v; creates %d", b, a, creates(l))
	}
	// 800 bytes used: 300 more do not fit; a second segment is created.
	c, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 300)})
	if err != nil {
		t.Fatal(err)
	}
	if c[0].SegmentID == a[0].SegmentID || creates(l) != 2 {
		t.Fatalf("overflow went to %d (first %d), creates %d", c[0].SegmentID, a[0].SegmentID, creates(l))
	}
	if n := m.Allocations(); n != 4 {
		t.Fatalf("%d allocations in memory, want 4", n)
	}
	clock.Advance(2 * time.Second)
	if n := m.Allocations(); n != 0 {
		t.Fatalf("%d allocations after expiry, want 0", n)
	}
}

func TestAssignRefusesBadInputAndNonOwners(t *testing.T) {
	m, l, _ := fixture(t, small)
	ctx := context.Background()
	before := l.State().AppliedIndex()
	cases := []struct {
		name string
		node uint64
		r    AssignRequest
		want error
	}{
		{"wrong node", node2, req(vch0, 2, 10), ErrNotOwner},
		{"old term", node1, req(vch0, 1, 10), ErrNotOwner},
		{"unknown vchannel", node1, req(vocab.VChannelName(pch0, coll, 7), 2, 10), ErrNotFound},
		{"collection mismatch", node1, AssignRequest{CollectionID: 5, VChannel: vch0, PChannelTerm: 2, Bytes: 1}, ErrInvalid},
		{"nothing asked", node1, req(vch0, 2, 0), ErrInvalid},
		{"no node", 0, req(vch0, 2, 10), ErrInvalid},
	}
	for _, c := range cases {
		r := c.r
		if c.name == "nothing asked" {
			r.Rows = 0
		}
		if _, err := m.AssignSegmentID(ctx, c.node, []AssignRequest{r}); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
		}
	}
	if l.State().AppliedIndex() != before || m.Allocations() != 0 {
		t.Fatal("a refused assignment changed something")
	}
	l.SetEstablished(0)
	if _, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 10)}); !errors.Is(err, ErrNotLeader) || !errors.Is(err, leadership.ErrNotLeader) {
		t.Fatalf("not leading: %v, want leadership.ErrNotLeader (the one not-leader error)", err)
	}
}

func TestTimeTicksOwnerChecked(t *testing.T) {
	m, _, _ := fixture(t, small)
	acc, refused, err := m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, 50}, {vch1, 2, 60}, {vch0, 2, 40}})
	if err != nil || acc != 2 || len(refused) != 1 {
		t.Fatalf("accepted %d refused %v err %v", acc, refused, err)
	}
	if got := m.TimeTicks(); got[vch0] != 50 || got[vch1] != 0 {
		t.Fatalf("ticks %v (must never go back, vch1 is node 2's)", got)
	}
}

func TestNewLeaderForgetsMemory(t *testing.T) {
	m, l, _ := fixture(t, small)
	ctx := context.Background()
	if _, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 100)}); err != nil {
		t.Fatal(err)
	}
	m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, 50}})
	l.Establish(t, 3)
	if _, _, err := m.ReportTimeTicks(node1, nil); err != nil {
		t.Fatal(err)
	}
	if n, ticks := m.Allocations(), m.TimeTicks(); n != 0 || len(ticks) != 0 {
		t.Fatalf("a new term kept %d allocations and ticks %v", n, ticks)
	}
}

func mustSeg(t *testing.T, l *controllertest.Leader, id int64) *fsm.Segment {
	t.Helper()
	g, ok := l.State().Segment(id)
	if !ok {
		t.Fatalf("segment %d missing", id)
	}
	return g
}

func TestRoundSealsByCapacityAfterTheFirstExpiry(t *testing.T) {
	m, l, clock := fixture(t, small)
	ctx := context.Background()
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 950)})
	if err != nil {
		t.Fatal(err)
	}
	id := a[0].SegmentID
	// 1000 bytes reach any capacity of this config (900..1000).
	if _, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 50)}); err != nil {
		t.Fatal(err)
	}
	res, err := m.Round(ctx, 2)
	if err != nil || len(res.Sealed) != 0 {
		t.Fatalf("sealed %v in the first expiry period (err %v)", res.Sealed, err)
	}
	clock.Advance(2 * time.Second)
	res, err = m.Round(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sealed) != 1 || res.Sealed[0] != (Decision{id, logpb.SealReason_SEAL_CAPACITY}) {
		t.Fatalf("sealed %v, want segment %d by capacity", res.Sealed, id)
	}
	g := mustSeg(t, l, id)
	if g.State != logpb.SegmentState_SEGMENT_SEALED || g.SealTs == 0 || g.SealReason != logpb.SealReason_SEAL_CAPACITY {
		t.Fatalf("segment %+v", g)
	}
	// Its seal carries the routine's term: a round for an old term does nothing.
	if _, err := m.Round(ctx, 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("round in an old term: %v", err)
	}
}

func TestFlushWaitsForTickAndExpiry(t *testing.T) {
	m, l, clock := fixture(t, small)
	ctx := context.Background()
	clock.Advance(3 * time.Second) // past the new leader's first expiry
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 10)})
	if err != nil {
		t.Fatal(err)
	}
	id := a[0].SegmentID
	sealTs := fsm.ComposeTS(clock.Now().UnixMilli())
	if got, err := m.SealCollection(ctx, coll, sealTs); err != nil || len(got) != 1 || got[0] != id {
		t.Fatalf("SealCollection: %v %v", got, err)
	}
	round := func() []int64 {
		t.Helper()
		r, err := m.Round(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		return r.Flushing
	}
	if f := round(); len(f) != 0 {
		t.Fatalf("flushing %v without any time tick", f)
	}
	m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, sealTs - 1}})
	if f := round(); len(f) != 0 {
		t.Fatalf("flushing %v with the tick below the seal time", f)
	}
	m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, sealTs + 10}})
	if f := round(); len(f) != 0 {
		t.Fatalf("flushing %v while its allocation is live", f)
	}
	clock.Advance(2 * time.Second)
	if f := round(); len(f) != 0 {
		t.Fatalf("flushing %v with the tick below the allocation's expiry", f)
	}
	m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, a[0].ExpireTs}})
	if f := round(); len(f) != 1 || f[0] != id {
		t.Fatalf("flushing %v, want [%d]", f, id)
	}
	if g := mustSeg(t, l, id); g.State != logpb.SegmentState_SEGMENT_FLUSHING {
		t.Fatalf("segment is %s", g.State)
	}
	// Once it has left the pipeline its allocation memory is forgotten.
	if n := m.Tracked(); n != 1 {
		t.Fatalf("%d segments tracked before the next round, want 1", n)
	}
	if _, err := m.Round(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n := m.Tracked(); n != 0 {
		t.Fatalf("%d segments still tracked after the segment became Flushing", n)
	}
}

func TestNewLeaderTreatsInheritedSegmentsAsAllocated(t *testing.T) {
	m, l, clock := fixture(t, small)
	ctx := context.Background()
	clock.Advance(3 * time.Second)
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 10)})
	if err != nil {
		t.Fatal(err)
	}
	sealTs := fsm.ComposeTS(clock.Now().UnixMilli())
	if _, err := m.SealCollection(ctx, coll, sealTs); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second) // the old allocation has long expired
	l.Establish(t, 3)              // a new leader: its memory is empty
	m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, fsm.ComposeTS(clock.Now().UnixMilli())}})
	if r, err := m.Round(ctx, 3); err != nil || len(r.Flushing) != 0 {
		t.Fatalf("new leader flushed %v before one expiry period (err %v)", r.Flushing, err)
	}
	clock.Advance(2 * time.Second)
	m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, fsm.ComposeTS(clock.Now().UnixMilli() + 1)}})
	if r, err := m.Round(ctx, 3); err != nil || len(r.Flushing) != 1 || r.Flushing[0] != a[0].SegmentID {
		t.Fatalf("after one expiry period: %v (err %v)", r.Flushing, err)
	}
}

// TestDeposedOwnersTickDoesNotFlush: a tick reported by the PChannel's
// previous owner does not make a segment flushable once the PChannel has
// moved (the new owner has not consumed anything yet).
func TestDeposedOwnersTickDoesNotFlush(t *testing.T) {
	m, l, clock := fixture(t, small)
	ctx := context.Background()
	clock.Advance(3 * time.Second)
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 10)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SealCollection(ctx, coll, fsm.ComposeTS(clock.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second)
	if _, _, err := m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, a[0].ExpireTs + 1}}); err != nil {
		t.Fatal(err)
	}
	// dml_0 moves to node 2 at term 3 before the round runs.
	l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: pch0, NodeId: node2, ExpectedTerm: 2}}})
	if r, err := m.Round(ctx, 2); err != nil || len(r.Flushing) != 0 {
		t.Fatalf("flushing %v on the old owner's tick (err %v)", r.Flushing, err)
	}
	if _, _, err := m.ReportTimeTicks(node2, []TimeTick{{vch0, 3, a[0].ExpireTs + 1}}); err != nil {
		t.Fatal(err)
	}
	if r, err := m.Round(ctx, 2); err != nil || len(r.Flushing) != 1 {
		t.Fatalf("the new owner's tick: flushing %v (err %v)", r.Flushing, err)
	}
}
