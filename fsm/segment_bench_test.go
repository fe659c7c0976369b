package fsm

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// benchSegmentState builds the Synthetic state holding n segments (and
// n/10 VChannels). It returns the state and the heap the segments added
// (bytes), VChannels excluded.
func benchSegmentState(tb testing.TB, n int) (*State, uint64) {
	tb.Helper()
	shape := SyntheticShape{Segments: n}
	s, err := syntheticChannels(shape)
	if err != nil {
		tb.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s.addSyntheticSegments(n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	return s, after.HeapAlloc - before.HeapAlloc
}

// BenchmarkSaveBinlogPathsApply is the cost of one SaveBinlogPaths apply
// (two binlogs appended, DML position moved) against a state holding 100k
// segments.
func BenchmarkSaveBinlogPathsApply(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) { benchSaveBinlogPathsApply(b, n) })
	}
}

func benchSaveBinlogPathsApply(b *testing.B, n int) {
	s, _ := benchSegmentState(b, n)
	var targets []*Segment
	s.EachActiveSegment(func(g *Segment) bool {
		if g.State == logpb.SegmentState_SEGMENT_GROWING {
			targets = append(targets, g)
		}
		return true
	})
	// Make every PChannel owned by node 1 at term 2 so saves pass the owner check.
	for _, p := range s.PChannels() {
		np := clonePChannel(p)
		np.State, np.NodeId, np.Term = logpb.PChannelState_PCHANNEL_ASSIGNED, 1, 2
		s.ch.pchannels = s.ch.pchannels.Set(p.Name, np)
	}
	// Time ticks just under the committed TSO window, growing by one
	// logical step per save so every DML position moves forward.
	base := ComposeTS(s.TSOLimitPhysicalMs() - 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		target := targets[i%len(targets)]
		ts := base + uint64(i)
		c := commands.MustNew(&logpb.SaveBinlogPaths{NodeId: 1, Vchannel: target.VChannel, PchannelTerm: 2, SegmentId: target.ID,
			CollectionId: target.CollectionID, PartitionId: target.PartitionID, Level: logpb.SegmentLevel_LEVEL_L1,
			Binlogs: []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{
				{LogId: int64(1<<40 + 2*i), EntriesNum: 10, TimestampFrom: ts, TimestampTo: ts},
				{LogId: int64(1<<40 + 2*i + 1), EntriesNum: 10, TimestampFrom: ts, TimestampTo: ts}}}},
			Checkpoints: []*logpb.SegmentCheckpointUpdate{{SegmentId: target.ID, Position: &logpb.WALPosition{Term: 2, Offset: uint64(i), Timestamp: ts}, NumOfRows: 10}}})
		next, res, err := s.ApplyCommands(s.AppliedIndex()+1, c)
		if err != nil || res[0].Rejection != nil {
			b.Fatalf("%v %v", err, res[0].GetRejection())
		}
		s = next
	}
}

// BenchmarkRecoveryInfo1000Flushed: GetRecoveryInfo's work for a VChannel
// holding 1,000 flushed segments (plus a few unflushed), in a state of
// 100k segments.
func BenchmarkRecoveryInfo1000Flushed(b *testing.B) {
	s, _ := benchSegmentState(b, 100_000)
	coll, _ := s.ch.collections.Get(449000001)
	vch := coll.Vchannels[0]
	for i := 0; i < 1000; i++ {
		id := int64(449900000 + i)
		g := &Segment{ID: id, CollectionID: 449000001, PartitionID: 449000002, VChannel: vch, Level: logpb.SegmentLevel_LEVEL_L1,
			State: logpb.SegmentState_SEGMENT_FLUSHED, NumRows: 1000, Start: Position{Term: 3, Offset: uint64(i), Timestamp: uint64(i + 1)},
			DML: Position{Term: 3, Offset: uint64(i) + 10, Timestamp: uint64(i + 11)}}
		s.seg.put(g)
	}
	s.alloc.nextID = 449900000 + 1000
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ri, err := s.RecoveryInfo(vch)
		if err != nil || len(ri.Flushed) < 1000 {
			b.Fatalf("%v: %d flushed", err, len(ri.Flushed))
		}
	}
}
