package flush

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/testutil"
)

// decidedIn returns the decision term of every applied body of type T.
func decidedIn[T proto.Message](l *controllertest.Leader) []uint64 {
	var out []uint64
	terms := l.DecisionTerms()
	for i, b := range l.Applied() {
		if _, ok := b.(T); ok {
			out = append(out, terms[i])
		}
	}
	return out
}

// TestRunSealsAndFlushesOnTheFakeClock drives the leader routine itself:
// nothing happens until the clock moves past the first expiry period; then
// a full segment is sealed, and once its VChannel's tick passes the seal
// and the allocation's expiry it is marked Flushing. Both commands carry
// the routine's term and are proposed through the routine's proposer.
func TestRunSealsAndFlushesOnTheFakeClock(t *testing.T) {
	cfg := small
	cfg.Interval = time.Second
	m, l, clock := fixture(t, cfg)
	ctx := context.Background()
	defer controllertest.RunRoutine(t, l, m.Run, 2)()

	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	id := a[0].SegmentID
	controllertest.WaitForTimers(t, clock, 1)
	sealed := func() bool {
		g, _ := l.State().Segment(id)
		return g.State == logpb.SegmentState_SEGMENT_SEALED
	}
	controllertest.AdvanceUntil(t, clock, time.Second, "the full segment to be sealed", sealed)
	if now, start := clock.Now(), controllertest.Epoch.Add(cfg.AllocationExpiry); now.Before(start) {
		t.Fatalf("sealed at %v, before the first expiry period ended (%v)", now, start)
	}
	g, _ := l.State().Segment(id)
	tick := max(g.SealTs, a[0].ExpireTs)
	if _, _, err := m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, tick}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the sealed segment to become Flushing", func() bool {
		g, _ := l.State().Segment(id)
		return g.State == logpb.SegmentState_SEGMENT_FLUSHING
	})
	for _, terms := range [][]uint64{decidedIn[*logpb.SealSegments](l), decidedIn[*logpb.MarkSegmentsFlushing](l)} {
		if len(terms) != 1 || terms[0] != 2 {
			t.Fatalf("decision terms %v, want [2]", terms)
		}
	}
	applied, marks := l.Applied(), l.RoutineMarks()
	for i, b := range applied {
		switch b.(type) {
		case *logpb.SealSegments, *logpb.MarkSegmentsFlushing:
			if !marks[i] {
				t.Errorf("%T was not proposed through the routine's proposer", b)
			}
		}
	}
	seal := controllertest.AppliedOf[*logpb.SealSegments](l)[0]
	if seal.DecisionTerm != 2 || seal.Reason != logpb.SealReason_SEAL_CAPACITY || seal.SealTs < fsm.ComposeTS(controllertest.Epoch.UnixMilli()) {
		t.Fatalf("seal command %v", seal)
	}
}

// TestDeposedRoutineChangesNothing: a round of an old term proposes
// nothing, and a seal decided in an old term is refused by the FSM.
func TestDeposedRoutineChangesNothing(t *testing.T) {
	m, l, clock := fixture(t, small)
	ctx := context.Background()
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second)
	l.Establish(t, 3)
	before := l.State().AppliedIndex()
	if _, err := m.Round(ctx, 2); err == nil {
		t.Fatal("a round of term 2 ran in term 3")
	}
	if err := m.propose(ctx, 2, l, &logpb.SealSegments{SegmentIds: []int64{a[0].SegmentID}, SealTs: 5,
		Reason: logpb.SealReason_SEAL_CAPACITY, DecisionTerm: 2}); err == nil {
		t.Fatal("a seal decided in term 2 was applied in term 3")
	}
	if g, _ := l.State().Segment(a[0].SegmentID); g.State != logpb.SegmentState_SEGMENT_GROWING {
		t.Fatalf("segment is %s", g.State)
	}
	if got := l.State().AppliedIndex(); got > before+1 {
		t.Fatalf("applied index moved from %d to %d", before, got)
	}
}

// TestRoundPrunesDroppedSegmentsAfterRetention: a Dropped segment is kept
// for the retention and until its VChannel's checkpoint has passed its DML
// position (no prune is even proposed before), then forgotten by a command
// of the routine's term.
func TestRoundPrunesDroppedSegmentsAfterRetention(t *testing.T) {
	cfg := small
	cfg.DroppedRetention = time.Hour
	m, l, clock := fixture(t, cfg)
	ctx := context.Background()
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 10)})
	if err != nil {
		t.Fatal(err)
	}
	id := a[0].SegmentID
	dml := fsm.ComposeTS(clock.Now().UnixMilli())
	l.MustPropose(t, &logpb.SaveBinlogPaths{NodeId: node1, Vchannel: vch0, PchannelTerm: 2, SegmentId: id, CollectionId: coll,
		PartitionId: 1, Level: logpb.SegmentLevel_LEVEL_L1, Dropped: true,
		Checkpoints: []*logpb.SegmentCheckpointUpdate{{SegmentId: id, Position: &logpb.WALPosition{Term: 2, Offset: 7, Timestamp: dml}}}})
	checkpoint := func(ts uint64) {
		t.Helper()
		res := l.MustPropose(t, &logpb.UpdateChannelCheckpoints{NodeId: node1, Checkpoints: []*logpb.ChannelCheckpointUpdate{
			{Vchannel: vch0, PchannelTerm: 2, Position: &logpb.WALPosition{Term: 2, Offset: 8, Timestamp: ts}}}})
		if res.GetCheckpoints().GetAccepted() != 1 {
			t.Fatalf("checkpoint %d: %v", ts, res)
		}
	}
	checkpoint(dml) // at the DML position: not past it
	clock.Advance(59 * time.Minute)
	if r, err := m.Round(ctx, 2); err != nil || len(r.Pruned) != 0 {
		t.Fatalf("pruned %v before the retention (err %v)", r.Pruned, err)
	}
	clock.Advance(time.Minute)
	before := l.State().AppliedIndex()
	if r, err := m.Round(ctx, 2); err != nil || len(r.Pruned) != 0 || l.State().AppliedIndex() != before {
		t.Fatalf("before the checkpoint passed the segment: pruned %v (err %v), applied %d -> %d", r.Pruned, err, before, l.State().AppliedIndex())
	}
	checkpoint(dml + 1)
	if r, err := m.Round(ctx, 2); err != nil || len(r.Pruned) != 1 || r.Pruned[0] != id {
		t.Fatalf("after the retention: pruned %v (err %v)", r.Pruned, err)
	}
	if _, ok := l.State().Segment(id); ok {
		t.Fatal("the dropped segment is still there")
	}
	if terms := decidedIn[*logpb.PruneDroppedSegments](l); len(terms) != 1 || terms[0] != 2 {
		t.Fatalf("prune decision terms %v", terms)
	}
}

// TestTickWakesRoundOnlyWhenItCanFlush: a time-tick report wakes the flush
// round only when its VChannel has a Sealed segment the tick has reached;
// every other report waits for the periodic round (reports arrive many
// times a second, and a round scans every active segment).
func TestTickWakesRoundOnlyWhenItCanFlush(t *testing.T) {
	m, l, _ := fixture(t, small)
	a, err := m.AssignSegmentID(context.Background(), node1, []AssignRequest{req(vch0, 2, 100)})
	if err != nil {
		t.Fatal(err)
	}
	report := func(tick uint64) bool {
		t.Helper()
		if _, refused, err := m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, tick}}); err != nil || len(refused) > 0 {
			t.Fatalf("report tick %d: %v %v", tick, refused, err)
		}
		select {
		case <-m.kick:
			return true
		default:
			return false
		}
	}
	sealTs := a[0].ExpireTs + 1000
	if report(sealTs + 10) {
		t.Fatal("a tick on a VChannel with only a growing segment woke a round")
	}
	l.MustPropose(t, &logpb.SealSegments{SegmentIds: []int64{a[0].SegmentID}, SealTs: sealTs,
		Reason: logpb.SealReason_SEAL_FLUSH, DecisionTerm: 2})
	if !report(sealTs + 11) {
		t.Fatal("a tick past a sealed segment's seal time did not wake a round")
	}
	l.MustPropose(t, &logpb.MarkSegmentsFlushing{SegmentIds: []int64{a[0].SegmentID}, DecisionTerm: 2})
	if report(sealTs + 12) {
		t.Fatal("a tick on a VChannel whose segment is already Flushing woke a round")
	}
}

// TestRoundPrunesDroppedVChannelsAfterTheirSegments: a dropped
// collection's VChannels keep their dropped checkpoints for the retention
// and until none of their segments is left (the segments go first), then
// a command of the routine's term forgets them: drops free what creates
// took.
func TestRoundPrunesDroppedVChannelsAfterTheirSegments(t *testing.T) {
	cfg := small
	cfg.DroppedRetention = time.Hour
	m, l, clock := fixture(t, cfg)
	ctx := context.Background()
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 10)})
	if err != nil {
		t.Fatal(err)
	}
	l.MustPropose(t, &logpb.DropVirtualChannels{CollectionId: coll})
	records := l.State().RecordCount()
	clock.Advance(59 * time.Minute)
	before := l.State().AppliedIndex()
	if r, err := m.Round(ctx, 2); err != nil || len(r.Pruned)+len(r.PrunedVChannels) != 0 || l.State().AppliedIndex() != before {
		t.Fatalf("before the retention: pruned %v %v (err %v), applied %d -> %d", r.Pruned, r.PrunedVChannels, err, before, l.State().AppliedIndex())
	}
	clock.Advance(time.Minute)
	// The segment goes first; the VChannels' prune, applied after it,
	// finds neither holding a segment any more.
	r, err := m.Round(ctx, 2)
	if err != nil || len(r.Pruned) != 1 || r.Pruned[0] != a[0].SegmentID || len(r.PrunedVChannels) != 2 {
		t.Fatalf("first round after the retention: segments %v, vchannels %v (err %v); want the segment, then both", r.Pruned, r.PrunedVChannels, err)
	}
	for _, v := range []string{vch0, vch1} {
		if _, ok := l.State().ChannelCheckpoint(v); ok {
			t.Fatalf("the checkpoint of %s is still there", v)
		}
	}
	if got := l.State().RecordCount(); got != records-3 {
		t.Fatalf("records %d after the prunes, want %d (the segment and two checkpoints fewer)", got, records-3)
	}
	if terms := decidedIn[*logpb.PruneDroppedVChannels](l); len(terms) != 1 || terms[0] != 2 {
		t.Fatalf("prune decision terms %v", terms)
	}
	before = l.State().AppliedIndex()
	if r, err := m.Round(ctx, 2); err != nil || len(r.PrunedVChannels) != 0 || l.State().AppliedIndex() != before {
		t.Fatalf("nothing left to prune: %v (err %v), applied %d -> %d", r.PrunedVChannels, err, before, l.State().AppliedIndex())
	}
}
