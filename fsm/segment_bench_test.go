package fsm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// benchSegmentState builds a state holding n segments the way a busy
// cluster would: 16 PChannels, one VChannel per 10 segments (4 per
// collection), states mixed (10 % growing, 20 % sealed, 5 % flushing, 60 %
// flushed, 5 % dropped), each segment with start and DML positions and,
// once it has data, 4 fields × 2 insert binlogs plus one stats log. It
// returns the state and the heap the segments added (bytes).
func benchSegmentState(tb testing.TB, n int) (*State, uint64) {
	tb.Helper()
	var pcs []string
	for i := 0; i < 16; i++ {
		pcs = append(pcs, commands.PChannelName("by-dev-rootcoord-dml", i))
	}
	s, _, err := New().ApplyCommands(1, commands.MustNew(&logpb.InitStreaming{ClusterId: "by-dev", Pchannels: pcs}))
	if err != nil {
		tb.Fatal(err)
	}
	next := *s
	colls := max(1, n/40)
	for c := 1; c <= colls; c++ {
		if r := allocVirtualChannels(&next, int64(449000000+c), 4); r.Rejection != nil {
			tb.Fatal(r.Rejection)
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	states := []logpb.SegmentState{2, 3, 3, 5, 4, 4, 4, 4, 4, 4, 4, 4, 6, 2, 3, 4, 4, 4, 4, 6}
	for i := 0; i < n; i++ {
		coll := int64(449000000 + 1 + (i/10)%colls)
		cr, _ := next.ch.collections.Get(coll)
		vch := cr.Vchannels[(i/10/colls)%4]
		id := int64(449100000 + i)
		ts := uint64(449326301000000 + i)
		g := &Segment{ID: id, CollectionID: coll, PartitionID: coll + 1, VChannel: vch, Level: logpb.SegmentLevel_LEVEL_L1,
			State: states[i%len(states)], CreatedMs: 1700000000000 + int64(i), LastWriteMs: 1700000000000 + int64(i),
			Start: Position{Term: 3, Offset: uint64(i), Timestamp: ts}, StorageVersion: 2}
		if g.State != logpb.SegmentState_SEGMENT_GROWING {
			g.SealTs, g.SealedMs, g.SealReason = ts+100, g.CreatedMs+1000, logpb.SealReason_SEAL_CAPACITY
			g.DML = Position{Term: 3, Offset: uint64(i) + 100, Timestamp: ts + 100}
			g.NumRows, g.Size = 100000, 120<<20
			for f := int64(0); f < 4; f++ {
				g.Binlogs = append(g.Binlogs, FieldLogs{FieldID: 100 + f, Logs: []LogRef{
					{LogID: id*16 + f*2, Entries: 50000, TsFrom: ts, TsTo: ts + 50, MemorySize: 15 << 20},
					{LogID: id*16 + f*2 + 1, Entries: 50000, TsFrom: ts + 50, TsTo: ts + 100, MemorySize: 15 << 20}}})
			}
			g.Statslogs = []FieldLogs{{FieldID: 100, Logs: []LogRef{{LogID: id*16 + 9, Entries: 100000, TsFrom: ts, TsTo: ts + 100, MemorySize: 4096}}}}
		}
		if g.State == logpb.SegmentState_SEGMENT_DROPPED {
			g.DroppedMs = g.CreatedMs + 5000
		}
		next.seg.put(g)
	}
	next.alloc.nextID = uint64(449100000 + n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	return &next, after.HeapAlloc - before.HeapAlloc
}

// BenchmarkSegmentScale reports, for 100k and 1M segments, the live heap
// per segment (record + indexes), the snapshot size per segment, and the
// time to write a snapshot to a file (with fsync) and to restore it (with
// the original state dropped first, as on a restarting node). Run
// with -benchtime=1x; the figures are in bench/RESULTS.md.
func BenchmarkSegmentScale(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s, heap := benchSegmentState(b, n)
				if err := s.CheckInvariants(); err != nil {
					b.Fatal(err)
				}
				path := filepath.Join(b.TempDir(), "snap")
				start := time.Now()
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.WriteSnapshot(f); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				f.Close()
				write := time.Since(start)
				// Restore as a restarting node does: nothing else in memory.
				s = nil
				runtime.GC()
				fi, _ := os.Stat(path)
				f, _ = os.Open(path)
				start = time.Now()
				r, err := ReadSnapshot(bufio.NewReaderSize(f, 1<<20))
				restore := time.Since(start)
				f.Close()
				if err != nil {
					b.Fatal(err)
				}
				if r.SegmentCount() != n {
					b.Fatalf("restored %d segments, want %d", r.SegmentCount(), n)
				}
				b.ReportMetric(float64(heap)/float64(n), "heap-B/segment")
				b.ReportMetric(float64(fi.Size())/float64(n), "snapshot-B/segment")
				b.ReportMetric(write.Seconds(), "write-s")
				b.ReportMetric(restore.Seconds(), "restore-s")
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
			}
		})
	}
}

// BenchmarkSaveBinlogPathsApply is the cost of one SaveBinlogPaths apply
// (two binlogs appended, DML position moved) against a state holding 100k
// segments.
func BenchmarkSaveBinlogPathsApply(b *testing.B) {
	s, _ := benchSegmentState(b, 100_000)
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
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		target := targets[i%len(targets)]
		ts := uint64(449400000000000 + i)
		c := commands.MustNew(&logpb.SaveBinlogPaths{NodeId: 1, Vchannel: target.VChannel, PchannelTerm: 2, SegmentId: target.ID,
			CollectionId: target.CollectionID, PartitionId: target.PartitionID, Level: logpb.SegmentLevel_LEVEL_L1,
			Binlogs: []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{
				{LogId: int64(1<<40 + 2*i), EntriesNum: 10, TimestampFrom: ts, TimestampTo: ts},
				{LogId: int64(1<<40 + 2*i + 1), EntriesNum: 10, TimestampFrom: ts, TimestampTo: ts}}}},
			Checkpoints: []*logpb.SegmentCheckpointUpdate{{SegmentId: target.ID, Position: &logpb.WALPosition{Term: 3, Offset: uint64(i), Timestamp: ts}, NumOfRows: 10}}})
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
