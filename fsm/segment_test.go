package fsm

import (
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// ---- segment fixtures ------------------------------------------------------------

const coll = int64(100)

var (
	// v0 lives on p0 (node 1, term 2), v1 on p1 (node 2, term 2).
	v0 = vocab.VChannelName(p0, coll, 0)
	v1 = vocab.VChannelName(p1, coll, 1)
)

const (
	sgGrowing  = logpb.SegmentState_SEGMENT_GROWING
	sgSealed   = logpb.SegmentState_SEGMENT_SEALED
	sgFlushing = logpb.SegmentState_SEGMENT_FLUSHING
	sgFlushed  = logpb.SegmentState_SEGMENT_FLUSHED
	sgDropped  = logpb.SegmentState_SEGMENT_DROPPED
	lvL0       = logpb.SegmentLevel_LEVEL_L0
	lvL1       = logpb.SegmentLevel_LEVEL_L1
)

// segBase: base(), p0 → node 1 and p1 → node 2 at term 2, collection 100
// with v0 and v1, and a TSO window up to segTSOLimitMs (reported time
// ticks stay below it plus PositionSlackMs). The next global ID is 1.
func segBase(more ...commands.Command) []commands.Command {
	return concat(segBaseV1(), []commands.Command{extendTSO(segTSOLimitMs)}, more)
}

// segTSOLimitMs is segBase's committed TSO limit.
const segTSOLimitMs = 1_000_000

// segBaseV1 is segBase as the golden log v1 was recorded: no TSO window.
func segBaseV1(more ...commands.Command) []commands.Command {
	return concat(base(), assigned(p0, 1), assigned(p1, 2), []commands.Command{allocV(coll, 2)}, more)
}

func createSeg(vch string, node uint64, term int64) commands.Command {
	return cmd(&logpb.CreateSegment{CollectionId: coll, PartitionId: 1, Vchannel: vch, NodeId: node, PchannelTerm: term}, withProposedAt(1000))
}

func sealSegs(term uint64, ts uint64, ids ...int64) commands.Command {
	return cmd(&logpb.SealSegments{SegmentIds: ids, SealTs: ts, Reason: logpb.SealReason_SEAL_CAPACITY, DecisionTerm: term})
}

func sealColl(term uint64, ts uint64, c int64) commands.Command {
	return cmd(&logpb.SealSegments{CollectionId: c, SealTs: ts, Reason: logpb.SealReason_SEAL_FLUSH, DecisionTerm: term})
}

func markFlushing(term uint64, ids ...int64) commands.Command {
	return cmd(&logpb.MarkSegmentsFlushing{SegmentIds: ids, DecisionTerm: term})
}

func wpos(term int64, off, ts uint64) *logpb.WALPosition {
	return &logpb.WALPosition{Term: term, Offset: off, Timestamp: ts}
}

func binlog(id, rows int64) *logpb.LogRef {
	return &logpb.LogRef{LogId: id, EntriesNum: rows, TimestampFrom: 1, TimestampTo: 2, MemorySize: rows * 10}
}

type saveEdit func(*logpb.SaveBinlogPaths)

// save builds a SaveBinlogPaths for segment id on v0 from node 1 at term 2
// with one binlog (log id logID, rows rows) for field 100 and a checkpoint
// at timestamp ts.
func save(id, logID, rows int64, ts uint64, edits ...saveEdit) commands.Command {
	b := &logpb.SaveBinlogPaths{NodeId: 1, Vchannel: v0, PchannelTerm: 2, SegmentId: id, CollectionId: coll, PartitionId: 1,
		Level: lvL1, Binlogs: []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{binlog(logID, rows)}}},
		Checkpoints: []*logpb.SegmentCheckpointUpdate{{SegmentId: id, Position: wpos(2, uint64(ts), ts), NumOfRows: rows}}}
	for _, e := range edits {
		e(b)
	}
	return cmd(b, withProposedAt(2000))
}

func flushed(b *logpb.SaveBinlogPaths)     { b.Flushed = true }
func droppedSave(b *logpb.SaveBinlogPaths) { b.Dropped = true }
func fromNode(n uint64, term int64) saveEdit {
	return func(b *logpb.SaveBinlogPaths) { b.NodeId, b.PchannelTerm = n, term }
}
func noBinlogs(b *logpb.SaveBinlogPaths) { b.Binlogs = nil; b.Checkpoints[0].NumOfRows = 0 }
func afterDML(b *logpb.SaveBinlogPaths)  { b.AfterDml = true }

// tsRange sets the time ticks of the save's binlogs.
func tsRange(from, to uint64) saveEdit {
	return func(b *logpb.SaveBinlogPaths) {
		for _, f := range b.Binlogs {
			for _, l := range f.Logs {
				l.TimestampFrom, l.TimestampTo = from, to
			}
		}
	}
}

func cpUpdate(node uint64, vch string, term int64, ts uint64) commands.Command {
	return cmd(&logpb.UpdateChannelCheckpoints{NodeId: node, Checkpoints: []*logpb.ChannelCheckpointUpdate{
		{Vchannel: vch, PchannelTerm: term, Position: wpos(term, ts, ts)}}}, withProposedAt(3000))
}

func segResult(ids ...int64) *logpb.Result {
	if ids == nil {
		ids = []int64{}
	}
	return segmentIDs(ids)
}

func wantSeg(id int64, state logpb.SegmentState, rows int64) func(t *testing.T, _, after *State) {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		g, ok := after.Segment(id)
		if !ok {
			t.Fatalf("segment %d missing", id)
		}
		if g.State != state || g.NumRows != rows {
			t.Fatalf("segment %d: %s with %d rows, want %s with %d", id, g.State, g.NumRows, state, rows)
		}
	}
}

// ---- tables ------------------------------------------------------------------------

func TestApplyCreateSegment(t *testing.T) {
	runApplyCases(t, []applyCase{
		{name: "owner creates a growing L1 segment with the next global id", setup: segBase(),
			cmd: createSeg(v0, 1, 2), want: segResult(1), check: func(t *testing.T, before, after *State) {
				g, _ := after.Segment(1)
				if g.State != sgGrowing || g.Level != lvL1 || g.VChannel != v0 || g.CreatedMs != 1000 || after.NextID() != 2 {
					t.Fatalf("segment %+v, next id %d", g, after.NextID())
				}
				if got := after.SegmentsOfVChannel(v0); len(got) != 1 || after.SegmentCountBy(sgGrowing, lvL1) != 1 {
					t.Fatalf("indexes: %v, count %d", got, after.SegmentCountBy(sgGrowing, lvL1))
				}
			}},
		{name: "another node is refused", setup: segBase(), cmd: createSeg(v0, 2, 2),
			want: rejected(logpb.RejectCode_REJECT_STALE), wantMsg: "not the owner"},
		{name: "an older pchannel term is refused", setup: segBase(assign(asg(p0, 3, 2)), done(pt(p0, 3))),
			cmd: createSeg(v0, 1, 2), want: rejected(logpb.RejectCode_REJECT_STALE)},
		{name: "unknown vchannel", setup: segBase(), cmd: createSeg(vocab.VChannelName(p0, coll, 5), 1, 2),
			want: rejected(logpb.RejectCode_REJECT_NOT_FOUND)},
		{name: "bad shape", setup: segBase(), cmd: createSeg(v0, 0, 2), want: rejected(logpb.RejectCode_REJECT_INVALID)},
		{name: "unassigned pchannel", setup: concat(base(), []commands.Command{allocV(coll, 2)}),
			cmd: createSeg(vocab.VChannelName(p0, coll, 0), 1, 1), want: rejected(logpb.RejectCode_REJECT_STALE)},
	})
}

func TestApplySealAndMarkFlushing(t *testing.T) {
	two := segBase(createSeg(v0, 1, 2), createSeg(v1, 2, 2))
	runApplyCases(t, []applyCase{
		{name: "seal listed", setup: two, cmd: sealSegs(2, 500, 1), want: segResult(1),
			check: func(t *testing.T, _, after *State) {
				g, _ := after.Segment(1)
				if g.State != sgSealed || g.SealTs != 500 || g.SealReason != logpb.SealReason_SEAL_CAPACITY {
					t.Fatalf("segment 1: %+v", g)
				}
				if g2, _ := after.Segment(2); g2.State != sgGrowing {
					t.Fatalf("segment 2 is %s", g2.State)
				}
			}},
		{name: "seal a whole collection at once", setup: two, cmd: sealColl(2, 600, coll), want: segResult(1, 2)},
		{name: "sealing again changes nothing", setup: append(append([]commands.Command{}, two...), sealSegs(2, 500, 1)),
			cmd: sealSegs(2, 700, 1), want: segResult(), unchanged: true},
		{name: "decision from another term", setup: two, cmd: sealSegs(1, 500, 1), want: rejected(logpb.RejectCode_REJECT_STALE), wantMsg: "decided in term 1"},
		{name: "unknown segment rejects the whole seal", setup: two, cmd: sealSegs(2, 500, 1, 9), want: rejected(logpb.RejectCode_REJECT_NOT_FOUND)},
		{name: "zero seal ts", setup: two, cmd: sealSegs(2, 0, 1), want: rejected(logpb.RejectCode_REJECT_INVALID)},
		{name: "mark sealed flushing; growing skipped", setup: append(append([]commands.Command{}, two...), sealSegs(2, 500, 1)),
			cmd: markFlushing(2, 1, 2), want: segResult(1), check: wantSeg(1, sgFlushing, 0)},
		{name: "mark from another term", setup: append(append([]commands.Command{}, two...), sealSegs(2, 500, 1)),
			cmd: markFlushing(3, 1), want: rejected(logpb.RejectCode_REJECT_STALE)},
	})
}

func TestApplySaveBinlogPaths(t *testing.T) {
	one := segBase(createSeg(v0, 1, 2))
	with := func(more ...commands.Command) []commands.Command {
		return append(append([]commands.Command{}, one...), more...)
	}
	runApplyCases(t, []applyCase{
		{name: "increment appends binlogs and moves the dml position", setup: one,
			cmd: save(1, 50, 10, 100), want: saveResult(false, sgGrowing), check: all(wantSeg(1, sgGrowing, 10),
				func(t *testing.T, _, after *State) {
					g, _ := after.Segment(1)
					if g.DML.Timestamp != 100 || g.BinlogFileCount() != 1 || g.LastWriteMs != 2000 {
						t.Fatalf("segment %+v", g)
					}
					if p := g.InsertLogPaths(); len(p) != 1 || p[0] != "insert_log/100/1/1/100/50" {
						t.Fatalf("paths %v", p)
					}
				})},
		{name: "second increment appends; rows from binlog entries", setup: with(save(1, 50, 10, 100)),
			cmd: save(1, 51, 5, 200), want: saveResult(false, sgGrowing), check: wantSeg(1, sgGrowing, 15)},
		{name: "the same log id again is not duplicated", setup: with(save(1, 50, 10, 100)),
			cmd: save(1, 50, 10, 150), want: saveResult(false, sgGrowing), check: wantSeg(1, sgGrowing, 10)},
		{name: "full binlogs replace", setup: with(save(1, 50, 10, 100)),
			cmd:  save(1, 60, 3, 200, func(b *logpb.SaveBinlogPaths) { b.WithFullBinlogs = true }),
			want: saveResult(false, sgGrowing), check: wantSeg(1, sgGrowing, 3)},
		{name: "flushed", setup: with(sealSegs(2, 90, 1), markFlushing(2, 1)),
			cmd: save(1, 50, 10, 100, flushed), want: saveResult(false, sgFlushed), check: wantSeg(1, sgFlushed, 10)},
		{name: "flushed straight from growing", setup: one,
			cmd: save(1, 50, 10, 100, flushed), want: saveResult(false, sgFlushed)},
		{name: "empty non-L0 segment is dropped on flush", setup: with(sealSegs(2, 90, 1)),
			cmd: save(1, 0, 0, 100, flushed, noBinlogs), want: saveResult(false, sgDropped), check: wantSeg(1, sgDropped, 0)},
		{name: "unknown L0 is created flushed", setup: segBase(reserveIDs(10)),
			cmd: save(5, 70, 0, 100, noBinlogs, func(b *logpb.SaveBinlogPaths) {
				b.Level = lvL0
				b.Deltalogs = []*logpb.LogRef{binlog(71, 4)}
			}),
			want: saveResult(false, sgFlushed), check: func(t *testing.T, _, after *State) {
				g, _ := after.Segment(5)
				if g.Level != lvL0 || g.State != sgFlushed || len(g.Deltalogs) != 1 {
					t.Fatalf("segment %+v", g)
				}
			}},
		{name: "L0 with an id never allocated", setup: segBase(),
			cmd:  save(500, 70, 0, 100, noBinlogs, func(b *logpb.SaveBinlogPaths) { b.Level = lvL0 }),
			want: rejected(logpb.RejectCode_REJECT_INVALID)},
		{name: "unknown L1 segment", setup: one, cmd: save(9, 50, 10, 100), want: rejected(logpb.RejectCode_REJECT_NOT_FOUND)},
		{name: "non-owner node changes nothing", setup: one, cmd: save(1, 50, 10, 100, fromNode(2, 2)),
			want: rejected(logpb.RejectCode_REJECT_STALE), wantMsg: "not the owner"},
		{name: "old owner after reassignment (old term) changes nothing",
			setup: with(assign(asg(p0, 2, 2)), done(pt(p0, 3))), cmd: save(1, 50, 10, 100),
			want: rejected(logpb.RejectCode_REJECT_STALE)},
		{name: "save after flushed is stale, no write", setup: with(save(1, 50, 10, 100, flushed)),
			cmd: save(1, 51, 10, 200), want: saveResult(true, sgFlushed), unchanged: true},
		{name: "older dml position is stale, no write", setup: with(save(1, 50, 10, 100)),
			cmd: save(1, 51, 10, 90), want: saveResult(true, sgGrowing), unchanged: true},
		// after_dml: a partial save committed after its flusher gave up on
		// it; the flusher recovered without it and saves the same rows again
		// (under a new log id, with a DML position at or past the first).
		{name: "after_dml: a binlog overlapping the stored dml position is stale, no write",
			setup: with(save(1, 50, 10, 100, tsRange(91, 100))),
			cmd:   save(1, 51, 12, 120, tsRange(95, 120), afterDML), want: saveResult(true, sgGrowing), unchanged: true},
		{name: "after_dml: the same overlap with flushed is stale too",
			setup: with(save(1, 50, 10, 100, tsRange(91, 100))),
			cmd:   save(1, 51, 10, 100, tsRange(91, 100), afterDML, flushed), want: saveResult(true, sgGrowing), unchanged: true},
		{name: "without after_dml the overlap is appended (v1 saves)",
			setup: with(save(1, 50, 10, 100, tsRange(91, 100))),
			cmd:   save(1, 51, 12, 120, tsRange(95, 120)), want: saveResult(false, sgGrowing), check: wantSeg(1, sgGrowing, 22)},
		{name: "after_dml: rows after the dml position append, then flush the remainder",
			setup: with(save(1, 50, 10, 100, tsRange(91, 100), afterDML)),
			cmd:   save(1, 51, 5, 130, tsRange(101, 130), afterDML, flushed), want: saveResult(false, sgFlushed), check: wantSeg(1, sgFlushed, 15)},
		{name: "after_dml: a retry of the recorded save (same log id) is harmless",
			setup: with(save(1, 50, 10, 100, tsRange(91, 100), afterDML)),
			cmd:   save(1, 50, 10, 100, tsRange(91, 100), afterDML), want: saveResult(false, sgGrowing), check: wantSeg(1, sgGrowing, 10)},
		{name: "after_dml: a flush without binlogs after partial saves keeps their rows",
			setup: with(save(1, 50, 10, 100, tsRange(91, 100), afterDML)),
			cmd:   save(1, 0, 0, 140, noBinlogs, afterDML, flushed), want: saveResult(false, sgFlushed), check: wantSeg(1, sgFlushed, 10)},
		{name: "dropped segment: stale, no write", setup: with(save(1, 50, 10, 100, droppedSave)),
			cmd: save(1, 51, 10, 200, flushed), want: saveResult(true, sgDropped), unchanged: true},
		{name: "drop a flushed segment", setup: with(save(1, 50, 10, 100, flushed)),
			cmd: save(1, 50, 10, 100, droppedSave), want: saveResult(false, sgDropped)},
		{name: "wrong collection for the segment", setup: one,
			cmd: save(1, 50, 10, 100, func(b *logpb.SaveBinlogPaths) { b.PartitionId = 7 }), want: rejected(logpb.RejectCode_REJECT_CONFLICT)},
		{name: "other segments' positions advance, start positions set once", setup: with(createSeg(v0, 1, 2)),
			cmd: save(1, 50, 10, 100, func(b *logpb.SaveBinlogPaths) {
				b.Checkpoints = append(b.Checkpoints, &logpb.SegmentCheckpointUpdate{SegmentId: 2, Position: wpos(2, 80, 80), NumOfRows: 4})
				b.StartPositions = []*logpb.SegmentStartUpdate{{SegmentId: 1, Position: wpos(2, 1, 1)}, {SegmentId: 2, Position: wpos(2, 60, 60)}}
			}),
			want: saveResult(false, sgGrowing), check: func(t *testing.T, _, after *State) {
				g1, _ := after.Segment(1)
				g2, _ := after.Segment(2)
				if g1.Start.Timestamp != 1 || g2.Start.Timestamp != 60 || g2.DML.Timestamp != 80 || g2.NumRows != 4 {
					t.Fatalf("segments %+v / %+v", g1, g2)
				}
			}},
	})
}

func TestApplyUpdateChannelCheckpoints(t *testing.T) {
	cpRes := func(acc uint32, refused ...string) *logpb.Result {
		return &logpb.Result{Value: &logpb.Result_Checkpoints{Checkpoints: &logpb.CheckpointsResult{Accepted: acc, Refused: refused}}}
	}
	runApplyCases(t, []applyCase{
		{name: "first checkpoint", setup: segBase(), cmd: cpUpdate(1, v0, 2, 100), want: cpRes(1),
			check: func(t *testing.T, _, after *State) {
				cp, ok := after.ChannelCheckpoint(v0)
				if !ok || cp.Position.Timestamp != 100 || cp.NodeID != 1 || cp.PChannelTerm != 2 {
					t.Fatalf("checkpoint %+v", cp)
				}
			}},
		{name: "regression refused", setup: segBase(cpUpdate(1, v0, 2, 100)), cmd: cpUpdate(1, v0, 2, 90),
			want: cpRes(0, v0+": not newer than the stored checkpoint"), unchanged: true},
		{name: "non-owner refused", setup: segBase(), cmd: cpUpdate(2, v0, 2, 100),
			want: cpRes(0, v0+": node 2 at term 2 is not the owner of pchannel dml_0 (node 1 at term 2, PCHANNEL_ASSIGNED)"), unchanged: true},
		{name: "dropped sentinel is terminal", setup: segBase(cpUpdate(1, v0, 2, 100), dropV(coll)), cmd: cpUpdate(1, v0, 2, 200),
			want: cpRes(0, v0+": vchannel is dropped"), unchanged: true},
		{name: "sentinel cannot be reported", setup: segBase(), cmd: cpUpdate(1, v0, 2, commands.DroppedTimestamp),
			want: rejected(logpb.RejectCode_REJECT_INVALID)},
	})
}

func TestDropCollectionDropsSegmentsAndSetsSentinel(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), createSeg(v1, 2, 2), save(1, 50, 10, 100, flushed))...)
	s, _ = mustApply(t, s, cmd(&logpb.DropVirtualChannels{CollectionId: coll}, withProposedAt(4000)))
	for _, id := range []int64{1, 2} {
		if g, _ := s.Segment(id); g.State != sgDropped || g.DroppedMs != 4000 {
			t.Fatalf("segment %d: %+v", id, g)
		}
	}
	for _, v := range []string{v0, v1} {
		cp, ok := s.ChannelCheckpoint(v)
		if !ok || !cp.Dropped() {
			t.Fatalf("checkpoint of %s: %+v", v, cp)
		}
	}
	ri, err := s.RecoveryInfo(v0)
	if err != nil || !ri.Dropped {
		t.Fatalf("recovery info of a dropped vchannel: %+v, %v", ri, err)
	}
}

func TestApplyPruneDroppedSegments(t *testing.T) {
	prune := func(term uint64, retention int64, max uint32, at int64) commands.Command {
		return cmd(&logpb.PruneDroppedSegments{RetentionMs: retention, MaxCount: max, DecisionTerm: term}, withProposedAt(at))
	}
	// Segments 1 and 2 dropped at 2000 (by saves, DML positions at tick
	// 100), 3 still growing; v0's checkpoint has passed them.
	three := segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2), createSeg(v0, 1, 2),
		save(1, 50, 10, 100, droppedSave), save(2, 51, 10, 100, droppedSave), cpUpdate(1, v0, 2, 101))
	runApplyCases(t, []applyCase{
		{name: "too young: nothing pruned", setup: three, cmd: prune(2, 5000, 10, 6999), want: segResult(), unchanged: true},
		{name: "old enough: pruned, oldest first, at most max", setup: three, cmd: prune(2, 5000, 1, 7000), want: segResult(1),
			check: func(t *testing.T, _, after *State) {
				if _, ok := after.Segment(1); ok {
					t.Fatal("segment 1 still there")
				}
				if g, ok := after.Segment(2); !ok || g.State != sgDropped {
					t.Fatal("segment 2 must stay (max count 1)")
				}
				if got := after.SegmentsOfVChannel(v0); len(got) != 2 || after.SegmentCountBy(sgDropped, lvL1) != 1 {
					t.Fatalf("indexes after prune: %d segments on v0, %d dropped", len(got), after.SegmentCountBy(sgDropped, lvL1))
				}
				if ms, ok := after.OldestDroppedMs(); !ok || ms != 2000 {
					t.Fatalf("oldest dropped %d %v", ms, ok)
				}
			}},
		{name: "live segments are never pruned", setup: three, cmd: prune(2, 1000, 100, 1_000_000), want: segResult(1, 2),
			check: wantSeg(3, sgGrowing, 0)},
		{name: "decision from another term", setup: three, cmd: prune(1, 5000, 10, 7000), want: rejected(logpb.RejectCode_REJECT_STALE)},
		{name: "retention below a second", setup: three, cmd: prune(2, 10, 10, 7000), want: rejected(logpb.RejectCode_REJECT_INVALID)},
	})
}
