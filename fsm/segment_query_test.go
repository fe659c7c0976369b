package fsm

import (
	"errors"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

func ids(gs []*Segment) []int64 {
	out := []int64{}
	for _, g := range gs {
		out = append(out, g.ID)
	}
	return out
}

func eqIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRecoveryInfo(t *testing.T) {
	withStart := func(id int64, ts uint64) saveEdit {
		return func(b *logpb.SaveBinlogPaths) {
			b.StartPositions = []*logpb.SegmentStartUpdate{{SegmentId: id, Position: wpos(2, ts, ts)}}
		}
	}
	// 1: flushed at 100; 2: growing with data up to 180 (start 110);
	// 3: Flushing, nothing saved yet (not persisted: unflushed);
	// 4: dropped by a save; 6: L0.
	s := build(t, segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2), createSeg(v0, 1, 2), createSeg(v0, 1, 2), reserveIDs(5),
		sealSegs(2, 150, 3), markFlushing(2, 3),
		save(1, 50, 10, 100, flushed, withStart(1, 20)),
		save(2, 51, 3, 180, withStart(2, 110)),
		save(4, 52, 1, 90, droppedSave, withStart(4, 80)),
		save(6, 53, 0, 120, noBinlogs, func(b *logpb.SaveBinlogPaths) { b.Level = lvL0 }))...)
	ri, err := s.RecoveryInfo(v0)
	if err != nil {
		t.Fatal(err)
	}
	if !eqIDs(ids(ri.Unflushed), []int64{2, 3}) || !eqIDs(ids(ri.Flushed), []int64{1}) ||
		!eqIDs(ids(ri.DroppedSegments), []int64{4}) || !eqIDs(ids(ri.L0), []int64{6}) {
		t.Fatalf("classification: unflushed %v flushed %v dropped %v l0 %v", ids(ri.Unflushed), ids(ri.Flushed), ids(ri.DroppedSegments), ids(ri.L0))
	}
	// No checkpoint, and segment 3 (unflushed) has no position: its rows
	// may be before every known position, so from the beginning.
	if ri.Seek != (Position{}) || ri.Dropped || ri.CollectionID != coll {
		t.Fatalf("seek %+v dropped %v coll %d", ri.Seek, ri.Dropped, ri.CollectionID)
	}
	// Once 3 has a start position: the earliest DML (or start) position of
	// a live segment.
	s, _ = mustApply(t, s, save(2, 54, 1, 185, func(b *logpb.SaveBinlogPaths) {
		b.StartPositions = []*logpb.SegmentStartUpdate{{SegmentId: 3, Position: wpos(2, 130, 130)}}
	}))
	if ri, _ = s.RecoveryInfo(v0); ri.Seek.Timestamp != 100 {
		t.Fatalf("seek %+v, want segment 1's DML position", ri.Seek)
	}
	s, _ = mustApply(t, s, cpUpdate(1, v0, 2, 105))
	if ri, _ = s.RecoveryInfo(v0); ri.Seek.Timestamp != 105 {
		t.Fatalf("with a checkpoint the seek is the checkpoint, got %+v", ri.Seek)
	}
	if ri, _ := s.RecoveryInfo(v1); ri.Seek != (Position{}) || len(ri.Unflushed) != 0 {
		t.Fatalf("empty vchannel: %+v", ri)
	}
	if _, err := s.RecoveryInfo(vocab.VChannelName(p0, 999, 0)); !errors.Is(err, ErrUnknownVChannel) {
		t.Fatalf("unknown vchannel: %v", err)
	}
}

func TestFlushState(t *testing.T) {
	flushTs := ComposeTS(10_000)
	s := build(t, segBase(createSeg(v0, 1, 2), createSeg(v1, 2, 2), sealColl(2, flushTs, coll))...)
	st := s.FlushState([]int64{1, 2}, flushTs, coll)
	if st.Flushed || st.SegmentsTotal != 2 || st.SegmentsFlushed != 0 || st.VChannelsTotal != 2 || st.VChannelsFlushed != 0 {
		t.Fatalf("before anything: %+v", st)
	}
	if st.Behind[0].LagMs != 10_000 || len(st.Behind) != 4 {
		t.Fatalf("lags %+v", st.Behind)
	}
	s, _ = mustApply(t, s, save(1, 50, 5, flushTs-1, flushed), cpUpdate(1, v0, 2, flushTs))
	st = s.FlushState([]int64{1, 2}, flushTs, coll)
	if st.Flushed || st.SegmentsFlushed != 1 || st.VChannelsFlushed != 1 {
		t.Fatalf("half way: %+v", st)
	}
	// A checkpoint below flushTs keeps it false even when segments are done.
	late := ComposeTS(9_000)
	s, _ = mustApply(t, s, cmd(&logpb.SaveBinlogPaths{NodeId: 2, Vchannel: v1, PchannelTerm: 2, SegmentId: 2, CollectionId: coll,
		PartitionId: 1, Level: lvL1, Flushed: true}), cpUpdate(2, v1, 2, late))
	st = s.FlushState([]int64{1, 2}, flushTs, coll)
	if st.Flushed || len(st.Behind) != 1 || st.Behind[0].Kind != "vchannel" || st.Behind[0].VChannel != v1 ||
		st.Behind[0].State != "behind" || st.Behind[0].LagMs != 1_000 {
		t.Fatalf("vchannel behind: %+v", st)
	}
	s, _ = mustApply(t, s, cpUpdate(2, v1, 2, flushTs+5))
	if st = s.FlushState([]int64{1, 2}, flushTs, coll); !st.Flushed {
		t.Fatalf("all done: %+v", st)
	}
	all, err := s.FlushAllState(map[string]uint64{p0: flushTs, p1: flushTs + 10}, 0)
	if err != nil || all.Flushed || all.Behind[0].VChannel != v1 {
		t.Fatalf("flush all: %+v %v", all, err)
	}
	if _, err := s.FlushAllState(map[string]uint64{p0: 1}, 0); err == nil {
		t.Fatal("a missing pchannel timestamp must be an error")
	}
	if _, err := s.FlushAllState(nil, 0); err == nil {
		t.Fatal("no timestamps at all must be an error")
	}
}
