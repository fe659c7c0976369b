package client

import (
	"sort"

	"github.com/coordd/coordd/api/coordpb"
)

// The replay filter (docs/semantics.md#recovery): a
// new owner of a VChannel seeks its PChannel's WAL to the earliest position
// any of its VChannels needs and replays from there; the filter drops what
// is already persisted, so every row ends up in exactly one segment's
// binlogs. It is a pure function of the recovery information and the
// stream: no I/O.

// ReplayPosition is a place in a PChannel's WAL: message ID (term, offset)
// and its time tick.
type ReplayPosition struct {
	Term      int64
	Offset    uint64
	Timestamp uint64
}

// ReplaySegment is a segment whose rows up to DMLTimestamp are persisted.
type ReplaySegment struct {
	ID           int64
	DMLTimestamp uint64
}

// RecoveryState is what a new owner knows about one VChannel when it
// starts replaying (from GetRecoveryInfo).
type RecoveryState struct {
	VChannel string
	// Dropped: the VChannel was dropped; nothing of it is replayed.
	Dropped bool
	// Seek: where replay must start for this VChannel; nil = from the
	// beginning of the log. Its timestamp is also a floor: every row with
	// a smaller time tick is already persisted.
	Seek *ReplayPosition
	// Persisted: flushed segments, and unflushed ones that already saved
	// part of their rows, with the DML position their binlogs reach.
	Persisted []ReplaySegment
	// DroppedSegments: inserts for these are discarded.
	DroppedSegments []int64
}

// EarliestSeek is where a PChannel's replay starts: the smallest seek
// offset among the non-dropped VChannels. fromStart is true when some
// non-dropped VChannel has no seek position (replay the whole log), and
// also when states holds no such VChannel at all.
func EarliestSeek(states []RecoveryState) (pos ReplayPosition, fromStart bool) {
	found := false
	for _, s := range states {
		if s.Dropped {
			continue
		}
		if s.Seek == nil {
			return ReplayPosition{}, true
		}
		if !found || s.Seek.Offset < pos.Offset {
			pos, found = *s.Seek, true
		}
	}
	return pos, !found
}

// ReplayFilter decides which insert messages of one VChannel a recovering
// flusher applies. Not safe for concurrent use.
type ReplayFilter struct {
	dropped   bool
	floor     uint64 // rows below this time tick are persisted
	segDrop   map[int64]struct{}
	segDML    map[int64]uint64 // persisted segments still filtered
	byDML     []ReplaySegment  // the same, by DMLTimestamp ascending
	forgotten int
}

// NewReplayFilter builds the filter for one VChannel.
func NewReplayFilter(s RecoveryState) *ReplayFilter {
	f := &ReplayFilter{dropped: s.Dropped, segDrop: map[int64]struct{}{}, segDML: map[int64]uint64{}}
	if s.Seek != nil {
		f.floor = s.Seek.Timestamp
	}
	for _, id := range s.DroppedSegments {
		f.segDrop[id] = struct{}{}
	}
	for _, seg := range s.Persisted {
		if old, ok := f.segDML[seg.ID]; !ok || seg.DMLTimestamp > old {
			f.segDML[seg.ID] = seg.DMLTimestamp
		}
	}
	for id, ts := range f.segDML {
		f.byDML = append(f.byDML, ReplaySegment{ID: id, DMLTimestamp: ts})
	}
	sort.Slice(f.byDML, func(i, j int) bool {
		if f.byDML[i].DMLTimestamp != f.byDML[j].DMLTimestamp {
			return f.byDML[i].DMLTimestamp < f.byDML[j].DMLTimestamp
		}
		return f.byDML[i].ID < f.byDML[j].ID
	})
	return f
}

// Keep reports whether an insert for segment with time tick ts (messages
// in log order) must be applied: not for a dropped VChannel or segment,
// not below the seek floor, not at or below a persisted segment's DML
// position. Every message advances the filter: a persisted segment is
// forgotten once the stream has passed its DML position.
func (f *ReplayFilter) Keep(segment int64, ts uint64) bool {
	keep := f.decide(segment, ts)
	f.Advance(ts)
	return keep
}

func (f *ReplayFilter) decide(segment int64, ts uint64) bool {
	if f.dropped || ts < f.floor {
		return false
	}
	if _, ok := f.segDrop[segment]; ok {
		return false
	}
	if dml, ok := f.segDML[segment]; ok && ts <= dml {
		return false
	}
	return true
}

// Advance tells the filter the stream has reached time tick ts (any
// message of the PChannel, not only inserts of this VChannel): persisted
// segments whose DML position is below ts are forgotten.
func (f *ReplayFilter) Advance(ts uint64) {
	for f.forgotten < len(f.byDML) && f.byDML[f.forgotten].DMLTimestamp < ts {
		delete(f.segDML, f.byDML[f.forgotten].ID)
		f.forgotten++
	}
	if f.forgotten == len(f.byDML) && f.forgotten > 0 {
		f.byDML, f.forgotten = nil, 0
	}
}

// Filtering reports how many persisted segments the filter still watches.
func (f *ReplayFilter) Filtering() int { return len(f.segDML) }

// RecoveryStateOf turns GetRecoveryInfo's answer into the filter's input:
// flushed segments are persisted up to their DML position (a flushed
// segment without one is persisted entirely), unflushed segments with a
// DML position have saved part of their rows, dropped segments are
// discarded.
func RecoveryStateOf(info *coordpb.GetRecoveryInfoResponse) RecoveryState {
	s := RecoveryState{VChannel: info.GetVchannel(), Dropped: info.GetDropped()}
	if p := info.GetSeekPosition(); p != nil {
		s.Seek = &ReplayPosition{Term: p.Term, Offset: p.Offset, Timestamp: p.Timestamp}
	}
	for _, seg := range info.GetFlushed() {
		ts := ^uint64(0)
		if p := seg.GetDmlPosition(); p != nil {
			ts = p.Timestamp
		}
		s.Persisted = append(s.Persisted, ReplaySegment{ID: seg.SegmentId, DMLTimestamp: ts})
	}
	for _, seg := range info.GetUnflushed() {
		if p := seg.GetDmlPosition(); p != nil && p.Timestamp > 0 {
			s.Persisted = append(s.Persisted, ReplaySegment{ID: seg.SegmentId, DMLTimestamp: p.Timestamp})
		}
	}
	for _, seg := range info.GetDroppedSegments() {
		s.DroppedSegments = append(s.DroppedSegments, seg.SegmentId)
	}
	return s
}
