package fsm

import (
	"fmt"
	"slices"

	"github.com/coordd/coordd/commands/logpb"
)

// checkSegmentInvariants verifies the write-path structures of one state:
// records under their own ID, IDs from the global ID space, indexes and
// counters in step with the records, sealed segments carry a seal time,
// no empty non-L0 segment stays Flushed, row counts and sizes are not
// negative, and every stored position is within the position bounds
// (which only widen: terms and the TSO limit only grow).
func (s *State) checkSegmentInvariants() error {
	var counts segmentCounts
	n, active, dropped := 0, 0, 0
	for it := s.seg.segs.Iterator(); !it.Done(); {
		id, g, _ := it.Next()
		n++
		if g == nil || g.ID != id || id <= 0 || uint64(id) >= s.alloc.nextID {
			return fmt.Errorf("segment record %d: id %d, next id %d", id, g.ID, s.alloc.nextID)
		}
		if _, ok := logpb.SegmentState_name[int32(g.State)]; !ok || g.State == logpb.SegmentState_SEGMENT_UNKNOWN {
			return fmt.Errorf("segment %d has state %d", id, g.State)
		}
		if _, ok := logpb.SegmentLevel_name[int32(g.Level)]; !ok || g.Level == logpb.SegmentLevel_LEVEL_UNKNOWN {
			return fmt.Errorf("segment %d has level %d", id, g.Level)
		}
		counts[g.State][g.Level]++
		if isActive(g.State) {
			active++
		}
		if _, ok := s.seg.dropped.Get(droppedKey{g.DroppedMs, id}); ok != (g.State == logpb.SegmentState_SEGMENT_DROPPED) {
			return fmt.Errorf("segment %d (%s) is in the dropped index: %v", id, g.State, ok)
		}
		if g.State == logpb.SegmentState_SEGMENT_DROPPED {
			dropped++
		}
		if _, ok := s.seg.active.Get(id); ok != isActive(g.State) {
			return fmt.Errorf("segment %d (%s) is in the active index: %v", id, g.State, ok)
		}
		if _, ok := s.seg.byChan.Get(chanSegKey{g.VChannel, id}); !ok {
			return fmt.Errorf("segment %d missing from the vchannel index", id)
		}
		if _, ok := s.seg.byColl.Get(collSegKey{g.CollectionID, id}); !ok {
			return fmt.Errorf("segment %d missing from the collection index", id)
		}
		if g.NumRows < 0 || g.Size < 0 {
			return fmt.Errorf("segment %d has %d rows and %d bytes", id, g.NumRows, g.Size)
		}
		for _, p := range []Position{g.Start, g.DML} {
			if err := s.checkStoredPosition(g.VChannel, p); err != nil {
				return fmt.Errorf("segment %d: %w", id, err)
			}
		}
		switch g.State {
		case logpb.SegmentState_SEGMENT_SEALED, logpb.SegmentState_SEGMENT_FLUSHING:
			if g.SealTs == 0 {
				return fmt.Errorf("segment %d is %s without a seal timestamp", id, g.State)
			}
		case logpb.SegmentState_SEGMENT_FLUSHED:
			if g.NumRows == 0 && g.Level != logpb.SegmentLevel_LEVEL_L0 {
				return fmt.Errorf("segment %d is Flushed with no rows (must be Dropped)", id)
			}
		}
	}
	if s.seg.byChan.Len() != n || s.seg.byColl.Len() != n {
		return fmt.Errorf("segment indexes hold %d/%d entries for %d segments", s.seg.byChan.Len(), s.seg.byColl.Len(), n)
	}
	if dropped != s.seg.dropped.Len() {
		return fmt.Errorf("dropped index holds %d segments, %d are dropped", s.seg.dropped.Len(), dropped)
	}
	if active != s.seg.active.Len() {
		return fmt.Errorf("active index holds %d segments, %d are active", s.seg.active.Len(), active)
	}
	if counts != s.seg.counts {
		return fmt.Errorf("segment counters %v, counted %v", s.seg.counts, counts)
	}
	for it := s.seg.cps.Iterator(); !it.Done(); {
		name, cp, _ := it.Next()
		if cp == nil || cp.VChannel != name {
			return fmt.Errorf("checkpoint under %q names %q", name, cp.VChannel)
		}
		// The checkpoint apply trusts this instead of looking the
		// VChannel up (applyUpdateChannelCheckpoints).
		if !cp.Dropped() {
			if _, ok := s.knownVChannel(name); !ok {
				return fmt.Errorf("checkpoint of %s is not the dropped sentinel, and %s is no live vchannel", name, name)
			}
		}
		if err := s.checkStoredPosition(name, cp.Position); err != nil {
			return fmt.Errorf("checkpoint of %s: %w", name, err)
		}
	}
	return nil
}

// allowedSegmentMoves lists the state changes one command may make.
var allowedSegmentMoves = map[[2]logpb.SegmentState]bool{
	{logpb.SegmentState_SEGMENT_GROWING, logpb.SegmentState_SEGMENT_SEALED}:    true,
	{logpb.SegmentState_SEGMENT_GROWING, logpb.SegmentState_SEGMENT_FLUSHED}:   true,
	{logpb.SegmentState_SEGMENT_GROWING, logpb.SegmentState_SEGMENT_DROPPED}:   true,
	{logpb.SegmentState_SEGMENT_SEALED, logpb.SegmentState_SEGMENT_FLUSHING}:   true,
	{logpb.SegmentState_SEGMENT_SEALED, logpb.SegmentState_SEGMENT_FLUSHED}:    true,
	{logpb.SegmentState_SEGMENT_SEALED, logpb.SegmentState_SEGMENT_DROPPED}:    true,
	{logpb.SegmentState_SEGMENT_FLUSHING, logpb.SegmentState_SEGMENT_FLUSHED}:  true,
	{logpb.SegmentState_SEGMENT_FLUSHING, logpb.SegmentState_SEGMENT_DROPPED}:  true,
	{logpb.SegmentState_SEGMENT_FLUSHED, logpb.SegmentState_SEGMENT_DROPPED}:   true,
	{logpb.SegmentState_SEGMENT_IMPORTING, logpb.SegmentState_SEGMENT_FLUSHED}: true,
	{logpb.SegmentState_SEGMENT_IMPORTING, logpb.SegmentState_SEGMENT_DROPPED}: true,
}

// segmentSuccessor checks what relates a state to its successor: only
// Dropped segments disappear (pruned), the others only make allowed moves, their DML position never goes
// back, a Flushed segment's binlogs change only when it is dropped, and
// channel checkpoints never regress (the dropped sentinel is terminal).
func segmentSuccessor(prev, next *State) error {
	for it := prev.seg.segs.Iterator(); !it.Done(); {
		id, p, _ := it.Next()
		g, ok := next.seg.segs.Get(id)
		if !ok {
			if p.State != logpb.SegmentState_SEGMENT_DROPPED {
				return fmt.Errorf("segment %d disappeared while %s (only Dropped segments are pruned)", id, p.State)
			}
			continue
		}
		if g == p {
			continue
		}
		if g.State != p.State && !allowedSegmentMoves[[2]logpb.SegmentState{p.State, g.State}] {
			return fmt.Errorf("segment %d moved from %s to %s", id, p.State, g.State)
		}
		if g.DML.Less(p.DML) {
			return fmt.Errorf("segment %d dml position went back from %v to %v", id, p.DML, g.DML)
		}
		if p.State == logpb.SegmentState_SEGMENT_FLUSHED && g.State == logpb.SegmentState_SEGMENT_FLUSHED &&
			!slices.EqualFunc(p.Binlogs, g.Binlogs, func(a, b FieldLogs) bool { return a.FieldID == b.FieldID && slices.Equal(a.Logs, b.Logs) }) {
			return fmt.Errorf("binlogs of flushed segment %d changed", id)
		}
		if p.State == logpb.SegmentState_SEGMENT_DROPPED && g != p {
			return fmt.Errorf("dropped segment %d changed", id)
		}
	}
	for it := prev.seg.cps.Iterator(); !it.Done(); {
		name, p, _ := it.Next()
		cp, ok := next.seg.cps.Get(name)
		if !ok {
			// Only a dropped VChannel's sentinel is forgotten
			// (PruneDroppedVChannels, which Apply allows only once no
			// collection holds the VChannel and none of its segments is
			// left; a later command of the same entry may record the
			// collection again).
			if !p.Dropped() {
				return fmt.Errorf("checkpoint of %s disappeared", name)
			}
			continue
		}
		if p.Dropped() && !cp.Dropped() {
			return fmt.Errorf("dropped checkpoint of %s was overwritten", name)
		}
		if cp.Position.Less(p.Position) {
			return fmt.Errorf("checkpoint of %s went back from %v to %v", name, p.Position, cp.Position)
		}
	}
	return nil
}

// checkStoredPosition: a stored position (absent, the dropped sentinel, or
// one Apply accepted) is within today's bounds.
func (s *State) checkStoredPosition(vchannel string, p Position) error {
	if p.IsZero() || p.IsDroppedSentinel() {
		return nil
	}
	return s.checkPosition("stored position", vchannel, p)
}
