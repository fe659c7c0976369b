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
	if err := s.checkChannelInvariants(); err != nil {
		return err
	}
	if err := s.checkBroadcastInvariants(); err != nil {
		return err
	}
	if err := s.checkSegmentInvariants(); err != nil {
		return err
	}
	if err := s.checkManifestInvariants(); err != nil {
		return err
	}
	return s.checkTokenInvariants()
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
	case next.ch.meta.NextNodeId < prev.ch.meta.NextNodeId:
		return fmt.Errorf("next streaming node id went back from %d to %d", prev.ch.meta.NextNodeId, next.ch.meta.NextNodeId)
	case prev.ch.meta.Cchannel != "" && next.ch.meta.Cchannel != prev.ch.meta.Cchannel:
		return fmt.Errorf("cchannel changed from %s to %s", prev.ch.meta.Cchannel, next.ch.meta.Cchannel)
	case next.AssignmentVersion().Less(prev.AssignmentVersion()):
		return fmt.Errorf("assignment version went back from %v to %v", prev.AssignmentVersion(), next.AssignmentVersion())
	}
	for it := prev.ch.pchannels.Iterator(); !it.Done(); {
		name, p, _ := it.Next()
		np, ok := next.ch.pchannels.Get(name)
		if !ok {
			return fmt.Errorf("pchannel %s disappeared", name)
		}
		if np.Term < p.Term || np.Term > p.Term+1 {
			return fmt.Errorf("pchannel %s term moved from %d to %d (must grow by at most 1 per command)", name, p.Term, np.Term)
		}
	}
	if err := segmentSuccessor(prev, next); err != nil {
		return err
	}
	return manifestSuccessor(prev, next)
}
