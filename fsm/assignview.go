package fsm

import "github.com/coordd/coordd/commands/logpb"

// AssignmentChanges is what a watcher holding version From needs to reach
// the state's version: everything when Full, otherwise only the records
// changed after From. Records are shared and read-only.
type AssignmentChanges struct {
	Full      bool
	Version   AssignmentVersion
	Nodes     []*logpb.StreamingNodeRecord // Full: live nodes only; delta: changed nodes, DOWN included
	PChannels []*logpb.PChannelRecord
}

// AssignmentChangesSince computes the delta from a watcher's version. A
// delta needs the same Global version (Local restarts with every leader)
// and a version at or above the delta floor (evicted records cannot be
// reported as gone); otherwise the answer is the full view.
func (s *State) AssignmentChangesSince(from AssignmentVersion, hasFrom bool) AssignmentChanges {
	cur := s.AssignmentVersion()
	out := AssignmentChanges{Version: cur}
	if !hasFrom || from.Global != cur.Global || from.Less(s.DeltaFloor()) || cur.Less(from) {
		out.Full = true
		for it := s.ch.nodes.Iterator(); !it.Done(); {
			_, n, _ := it.Next()
			if n.State != logpb.NodeState_NODE_DOWN {
				out.Nodes = append(out.Nodes, n)
			}
		}
		out.PChannels = s.PChannels()
		return out
	}
	changed := func(g, l uint64) bool { return g == cur.Global && l > from.Local }
	for it := s.ch.nodes.Iterator(); !it.Done(); {
		_, n, _ := it.Next()
		if changed(n.VersionGlobal, n.VersionLocal) {
			out.Nodes = append(out.Nodes, n)
		}
	}
	for it := s.ch.pchannels.Iterator(); !it.Done(); {
		_, p, _ := it.Next()
		if changed(p.VersionGlobal, p.VersionLocal) {
			out.PChannels = append(out.PChannels, p)
		}
	}
	return out
}
