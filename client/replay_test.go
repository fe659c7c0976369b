package client

import (
	"testing"

	"github.com/coordd/coordd/api/coordpb"

	"pgregory.net/rapid"
)

// The worked example of the flowgraph recovery design: segments s1, s2, s3
// with positions p1 < p2 < p3; s1 is unflushed (p1 is its start), s2 and
// s3 are flushed at p2 and p3. Replay seeks to p1; packs before p3 lose
// their s3 rows, packs before p2 their s2 rows; s1's rows are all kept.
func TestReplayFilterWorkedExample(t *testing.T) {
	const s1, s2, s3, s4 = 1, 2, 3, 4
	p1 := ReplayPosition{Term: 1, Offset: 100, Timestamp: 10}
	state := RecoveryState{VChannel: "v", Seek: &p1,
		Persisted: []ReplaySegment{{ID: s2, DMLTimestamp: 20}, {ID: s3, DMLTimestamp: 30}}}
	if pos, fromStart := EarliestSeek([]RecoveryState{state}); fromStart || pos != p1 {
		t.Fatalf("EarliestSeek = %+v, %v; want p1", pos, fromStart)
	}
	f := NewReplayFilter(state)
	stream := []struct {
		seg       int64
		ts        uint64
		keep      bool
		filtering int // persisted segments still watched afterwards
	}{
		{s1, 10, true, 2},  // s1 is unflushed: everything from p1 on is replayed
		{s2, 12, false, 2}, // before p2: already in s2's binlogs
		{s3, 14, false, 2}, // before p3: already in s3's binlogs
		{s2, 20, false, 2}, // at p2: still persisted
		{s3, 22, false, 1}, // the stream passed p2: s2 is forgotten
		{s1, 25, true, 1},
		{s3, 30, false, 1}, // at p3
		{s4, 31, true, 0},  // passed p3: nothing is filtered any more
		{s1, 35, true, 0},
	}
	for i, m := range stream {
		if got := f.Keep(m.seg, m.ts); got != m.keep {
			t.Fatalf("message %d (segment %d, ts %d): keep = %v, want %v", i, m.seg, m.ts, got, m.keep)
		}
		if got := f.Filtering(); got != m.filtering {
			t.Fatalf("after message %d: filtering %d segments, want %d", i, got, m.filtering)
		}
	}
}

func TestReplayFilterDropsAndFloor(t *testing.T) {
	seek := ReplayPosition{Offset: 5, Timestamp: 50}
	f := NewReplayFilter(RecoveryState{Seek: &seek, DroppedSegments: []int64{7}})
	if f.Keep(1, 49) {
		t.Fatal("a row below the seek floor was kept")
	}
	if !f.Keep(1, 50) {
		t.Fatal("a row at the seek position was dropped")
	}
	if f.Keep(7, 60) {
		t.Fatal("a row of a dropped segment was kept")
	}
	d := NewReplayFilter(RecoveryState{Dropped: true})
	if d.Keep(1, 1<<40) {
		t.Fatal("a row of a dropped VChannel was kept")
	}
	// The earliest seek ignores dropped VChannels; one without a seek
	// position means the whole log.
	a, b := ReplayPosition{Offset: 9}, ReplayPosition{Offset: 4}
	if pos, fromStart := EarliestSeek([]RecoveryState{{Seek: &a}, {Seek: &b}, {Dropped: true}}); fromStart || pos.Offset != 4 {
		t.Fatalf("EarliestSeek = %+v, %v", pos, fromStart)
	}
	if _, fromStart := EarliestSeek([]RecoveryState{{Seek: &a}, {}}); !fromStart {
		t.Fatal("a VChannel without a seek position must replay from the start")
	}
	if _, fromStart := EarliestSeek(nil); !fromStart {
		t.Fatal("no VChannels: from the start")
	}
}

// replaySim is a flusher of one PChannel carrying two VChannels and the
// coordinator state it reports to. The flusher may crash at any time and
// recover with the filters.
type replaySim struct {
	stream []simMsg // the WAL, ts strictly increasing
	// coordinator (durable), per VChannel
	flushedDML map[int64]uint64 // segment -> DML ts (segments belong to one VChannel)
	cp         [2]*ReplayPosition
	persisted  map[int64][]int64 // segment -> pks in its binlogs
	// flusher (memory)
	next    int // next WAL offset to consume
	filters [2]*ReplayFilter
	buffers map[int64]*simBuf
	// forgetOld: recovery information leaves out flushed segments wholly
	// below the VChannel's checkpoint (as if compacted or collected), so
	// only the seek floor keeps their rows from being replayed.
	forgetOld bool
}

type simMsg struct {
	vch int
	seg int64
	ts  uint64
	pks []int64
}

type simBuf struct {
	vch   int
	start ReplayPosition
	pks   []int64
}

func (s *replaySim) vchOf(seg int64) int {
	for _, m := range s.stream {
		if m.seg == seg {
			return m.vch
		}
	}
	return 0
}

func (s *replaySim) recover() {
	var states []RecoveryState
	for v := 0; v < 2; v++ {
		state := RecoveryState{Seek: s.cp[v]}
		for id, ts := range s.flushedDML {
			if s.forgetOld && s.cp[v] != nil && ts < s.cp[v].Timestamp {
				continue
			}
			if s.vchOf(id) == v {
				state.Persisted = append(state.Persisted, ReplaySegment{ID: id, DMLTimestamp: ts})
			}
		}
		states = append(states, state)
		s.filters[v] = NewReplayFilter(state)
	}
	pos, fromStart := EarliestSeek(states)
	s.next = int(pos.Offset)
	if fromStart {
		s.next = 0
	}
	s.buffers = map[int64]*simBuf{}
}

func (s *replaySim) consume() {
	m := s.stream[s.next]
	keep := s.filters[m.vch].Keep(m.seg, m.ts)
	s.filters[1-m.vch].Advance(m.ts)
	if keep {
		b := s.buffers[m.seg]
		if b == nil {
			b = &simBuf{vch: m.vch, start: ReplayPosition{Offset: uint64(s.next), Timestamp: m.ts}}
			s.buffers[m.seg] = b
		}
		b.pks = append(b.pks, m.pks...)
	}
	s.next++
}

// lastOf is the offset of segment's last message.
func (s *replaySim) lastOf(seg int64) int {
	last := -1
	for i, m := range s.stream {
		if m.seg == seg {
			last = i
		}
	}
	return last
}

// flush persists seg once all its messages are consumed (coordd asks only
// then), at the position of the last consumed message.
func (s *replaySim) flush(seg int64) {
	if _, done := s.flushedDML[seg]; done || s.lastOf(seg) >= s.next || s.next == 0 {
		return
	}
	if b := s.buffers[seg]; b != nil {
		s.persisted[seg] = append(s.persisted[seg], b.pks...)
		delete(s.buffers, seg)
	}
	s.flushedDML[seg] = s.stream[s.next-1].ts
}

// checkpoint reports, per VChannel, the earliest start of buffered data,
// else the next offset with the last consumed time tick; coordd never lets
// it regress.
func (s *replaySim) checkpoint(v int) {
	if s.next == 0 {
		return
	}
	cp := ReplayPosition{Offset: uint64(s.next), Timestamp: s.stream[s.next-1].ts}
	for _, b := range s.buffers {
		if b.vch == v && b.start.Offset < cp.Offset {
			cp = b.start
		}
	}
	if s.cp[v] == nil || cp.Timestamp > s.cp[v].Timestamp {
		s.cp[v] = &cp
	}
}

func TestReplayFilterExactlyOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// A stream of inserts on two VChannels into segments that overlap
		// in time (several partitions / allocations open at once).
		n := rapid.IntRange(1, 80).Draw(t, "messages")
		open := [2][]int64{{1}, {2}}
		nextSeg, pk := int64(3), int64(1000)
		var stream []simMsg
		ts := uint64(100)
		for i := 0; i < n; i++ {
			v := rapid.IntRange(0, 1).Draw(t, "vchannel")
			if rapid.IntRange(0, 4).Draw(t, "newSegment") == 0 || len(open[v]) == 0 {
				open[v] = append(open[v], nextSeg)
				nextSeg++
			}
			if len(open[v]) > 1 && rapid.IntRange(0, 5).Draw(t, "sealOne") == 0 {
				k := rapid.IntRange(0, len(open[v])-1).Draw(t, "sealed")
				open[v] = append(open[v][:k], open[v][k+1:]...)
			}
			seg := open[v][rapid.IntRange(0, len(open[v])-1).Draw(t, "segment")]
			rows := rapid.IntRange(1, 3).Draw(t, "rows")
			ts += uint64(rapid.IntRange(1, 3).Draw(t, "tsStep"))
			m := simMsg{vch: v, seg: seg, ts: ts}
			for r := 0; r < rows; r++ {
				m.pks = append(m.pks, pk)
				pk++
			}
			stream = append(stream, m)
		}
		s := &replaySim{stream: stream, flushedDML: map[int64]uint64{}, persisted: map[int64][]int64{},
			forgetOld: rapid.Bool().Draw(t, "forgetOld")}
		s.recover()
		for steps := 0; s.next < len(stream) && steps < 10*n; steps++ {
			switch rapid.IntRange(0, 9).Draw(t, "action") {
			case 0:
				s.recover() // crash: memory lost, state from the coordinator
			case 1, 2:
				s.checkpoint(rapid.IntRange(0, 1).Draw(t, "cpVChannel"))
			case 3, 4:
				s.flush(rapid.Int64Range(1, nextSeg-1).Draw(t, "flush"))
			default:
				s.consume()
			}
		}
		for s.next < len(stream) {
			s.consume()
		}
		for seg := int64(1); seg < nextSeg; seg++ {
			s.flush(seg)
		}
		// A buffer left over is rows replayed into a segment that was
		// already flushed: they would be persisted twice (or hold the
		// checkpoint back forever).
		for seg, b := range s.buffers {
			t.Fatalf("segment %d is flushed but rows %v were replayed into it", seg, b.pks)
		}
		count := map[int64]int{}
		for seg, pks := range s.persisted {
			for _, p := range pks {
				count[p]++
				if count[p] > 1 {
					t.Fatalf("pk %d persisted twice (again in segment %d)", p, seg)
				}
			}
		}
		for p := int64(1000); p < pk; p++ {
			if count[p] != 1 {
				t.Fatalf("pk %d persisted %d times", p, count[p])
			}
		}
	})
}

// Without the per-segment filter, a recovery after a flush replays the
// flushed segment's rows again: the property above depends on it.
func TestReplayWithoutSegmentFilterDuplicates(t *testing.T) {
	stream := []simMsg{{seg: 1, ts: 10, pks: []int64{1}}, {seg: 2, ts: 11, pks: []int64{2}}, {seg: 1, ts: 12, pks: []int64{3}}, {seg: 2, ts: 13, pks: []int64{4}}}
	s := &replaySim{stream: stream, flushedDML: map[int64]uint64{}, persisted: map[int64][]int64{}}
	s.recover()
	for s.next < 3 {
		s.consume()
	}
	s.flush(1)
	s.checkpoint(0) // segment 2 is buffered from ts 11: cp stays at 11
	if s.cp[0] == nil || s.cp[0].Timestamp != 11 {
		t.Fatalf("checkpoint %+v, want the start of segment 2", s.cp[0])
	}
	s.recover()
	if s.filters[0].Keep(1, 12) {
		t.Fatal("segment 1's row at ts 12 is persisted and must be dropped")
	}
	unfiltered := NewReplayFilter(RecoveryState{Seek: s.cp[0]})
	if !unfiltered.Keep(1, 12) {
		t.Fatal("without the persisted segment the row is replayed: the filter is what prevents a duplicate")
	}
}

func TestRecoveryStateOf(t *testing.T) {
	info := &coordpb.GetRecoveryInfoResponse{Vchannel: "p_1v0",
		SeekPosition:    &coordpb.Position{Term: 2, Offset: 10, Timestamp: 500},
		Flushed:         []*coordpb.SegmentRef{{SegmentId: 1, DmlPosition: &coordpb.Position{Timestamp: 600}}, {SegmentId: 2}},
		Unflushed:       []*coordpb.SegmentRef{{SegmentId: 3}, {SegmentId: 4, DmlPosition: &coordpb.Position{Timestamp: 550}}},
		DroppedSegments: []*coordpb.SegmentRef{{SegmentId: 5}}}
	f := NewReplayFilter(RecoveryStateOf(info))
	for _, c := range []struct {
		seg  int64
		ts   uint64
		keep bool
	}{{3, 499, false}, {3, 501, true}, {1, 502, false}, {2, 503, false}, {4, 504, false}, {5, 505, false}, {4, 551, true}, {1, 601, true}, {2, 602, false}} {
		if got := f.Keep(c.seg, c.ts); got != c.keep {
			t.Fatalf("segment %d at %d: keep = %v, want %v", c.seg, c.ts, got, c.keep)
		}
	}
}
