package fsm

import "fmt"

// CheckInvariants verifies the structural invariants of one state (see the
// package doc). Tests call it after every apply; ReadSnapshot calls it on
// every restored state.
func (s *State) CheckInvariants() error {
	if s.alloc.nextID == 0 {
		return fmt.Errorf("next global id is 0 (ids start at 1)")
	}
	if s.alloc.tsoLimitPhysicalMs < 0 {
		return fmt.Errorf("tso window limit %d is negative", s.alloc.tsoLimitPhysicalMs)
	}
	if n, m := s.dedup.byID.Len(), s.dedup.bySeq.Len(); n != m || n > MaxDedupEntries {
		return fmt.Errorf("request-id table: %d ids, %d sequence entries (max %d)", n, m, MaxDedupEntries)
	}
	for it := s.cluster.members.Iterator(); !it.Done(); {
		id, m, _ := it.Next()
		if m == nil || m.Id != id {
			return fmt.Errorf("member record under key %q has id %q", id, m.GetId())
		}
	}
	return nil
}

// Successor checks the invariants that relate a state to the state it was
// derived from: counters and terms never move backwards.
func Successor(prev, next *State) error {
	switch {
	case next.applied < prev.applied:
		return fmt.Errorf("applied index went back from %d to %d", prev.applied, next.applied)
	case next.alloc.tsoLimitPhysicalMs < prev.alloc.tsoLimitPhysicalMs:
		return fmt.Errorf("tso window limit went back from %d to %d", prev.alloc.tsoLimitPhysicalMs, next.alloc.tsoLimitPhysicalMs)
	case next.alloc.nextID < prev.alloc.nextID:
		return fmt.Errorf("next id went back from %d to %d", prev.alloc.nextID, next.alloc.nextID)
	case next.leader.term < prev.leader.term:
		return fmt.Errorf("established term went back from %d to %d", prev.leader.term, next.leader.term)
	}
	return nil
}
