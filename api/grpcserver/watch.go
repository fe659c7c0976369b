package grpcserver

import (
	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/fsm"
)

// WatchAssignments streams the assignment view from this node's applied
// state (any member serves it: versions only grow, and clients keep only
// strictly newer ones). The first message brings the client from
// from_version to now — a delta when possible, the full view otherwise —
// and every later one carries only what changed.
func (s *Server) WatchAssignments(req *coordpb.WatchAssignmentsRequest, stream grpc.ServerStreamingServer[coordpb.AssignmentUpdate]) error {
	ctx := stream.Context()
	if err := s.admitWatcher(); err != nil {
		return err
	}
	defer s.watchers.Add(-1)
	held := fsm.AssignmentVersion{Global: req.FromVersion.GetGlobal(), Local: req.FromVersion.GetLocal()}
	hasHeld := req.FromVersion != nil
	for {
		changed := s.node.StateChanged()
		st := s.node.State()
		// A node behind the client's version (a lagging follower) waits
		// until it has caught up: older views would only be discarded.
		if cur := st.AssignmentVersion(); !hasHeld || held.Less(cur) {
			ch := st.AssignmentChangesSince(held, hasHeld)
			if err := stream.Send(assignmentUpdate(st, ch)); err != nil {
				return err
			}
			held, hasHeld = ch.Version, true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return nil
		case <-changed:
		}
	}
}

func assignmentUpdate(st *fsm.State, ch fsm.AssignmentChanges) *coordpb.AssignmentUpdate {
	out := &coordpb.AssignmentUpdate{
		Version: apiVersion(ch.Version), Full: ch.Full, Cchannel: st.CChannel(),
		ReplicateConfig: channels.APIReplicateConfig(st.ReplicateConfiguration()),
	}
	for _, n := range ch.Nodes {
		out.Nodes = append(out.Nodes, channels.NodeInfo(n, nil, -1))
	}
	for _, p := range ch.PChannels {
		out.Channels = append(out.Channels, &coordpb.ChannelAssignment{
			Pchannel: p.Name, Term: p.Term, State: channels.StateName(p), NodeId: p.NodeId, AccessMode: channels.ModeName(p)})
	}
	return out
}
