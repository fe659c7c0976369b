package grpcserver

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/vocab"
)

func (s *Server) notEstablished() error {
	if s.node.IsLeader() {
		return raftnode.ErrNotEstablished
	}
	return &raftnode.NotLeaderError{}
}

// RegisterStreamingNode starts a streaming node session and returns its node
// ID, epoch and registration version (docs/semantics.md#streaming-nodes). A
// retry by the same process gets the same answer. FailedPrecondition while
// another process at the address has a live session; once that session has
// lapsed, the newcomer replaces it.
func (s *Server) RegisterStreamingNode(ctx context.Context, req *coordpb.RegisterStreamingNodeRequest) (*coordpb.RegisterStreamingNodeResponse, error) {
	bound, err := s.callerNode(ctx)
	if err != nil {
		return nil, err
	}
	body := &logpb.RegisterStreamingNode{Address: req.Address, ResourceGroup: req.ResourceGroup, Incarnation: req.Incarnation, BoundNode: bound}
	cmd, err := commands.New(body, "")
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RegisterStreamingNodeResponse, error) {
		return coordpb.NewStreamingNodeRegistryClient(c).RegisterStreamingNode(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if s.node.EstablishedTerm() == 0 {
		return nil, s.toStatus(ctx, s.notEstablished())
	}
	// A second process at a live node's address is refused while that
	// node's session is live; once it has lapsed the newcomer replaces it.
	for _, n := range s.node.State().StreamingNodes() {
		if n.Address != req.Address || n.State == logpb.NodeState_NODE_DOWN || n.Incarnation == req.Incarnation {
			continue
		}
		if age, ok := s.health.LastSeen(n.Id); ok && age <= s.health.TTL() {
			return nil, s.toStatus(ctx, fmt.Errorf("%w: address %s is held by streaming node %d, whose session is live (last heartbeat %v ago)",
				errPrecondition, req.Address, n.Id, age.Round(1e6)))
		}
		body.ReplaceNodeId = n.Id
	}
	res, err := s.commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	r := res.GetRegisterNode()
	return &coordpb.RegisterStreamingNodeResponse{NodeId: r.NodeId, Epoch: r.Epoch,
		RegisteredVersion: &coordpb.Version{Global: r.Version.GetGlobal(), Local: r.Version.GetLocal()}}, nil
}

// liveSession checks that (node, epoch) is a live registration.
func (s *Server) liveSession(node, epoch uint64) (*logpb.StreamingNodeRecord, error) {
	if node == 0 {
		return nil, fmt.Errorf("%w: node_id must be positive", errInvalid)
	}
	n, ok := s.node.State().StreamingNode(node)
	if !ok || n.State == logpb.NodeState_NODE_DOWN {
		return nil, fmt.Errorf("%w: streaming node %d is not registered (or its session ended); register again", errNotFound, node)
	}
	if n.Epoch != epoch {
		return nil, fmt.Errorf("%w: streaming node %d has epoch %d, not %d; register again", errNotFound, node, n.Epoch, epoch)
	}
	return n, nil
}

// Heartbeat keeps a streaming node session alive on the leader (leader memory
// only, never in the log) and answers with the coordinator term (a fence,
// docs/architecture.md#fencing), the node's state and the TTL. NotFound when
// the session is unknown, DOWN or of another epoch: the node must register
// again.
func (s *Server) Heartbeat(ctx context.Context, req *coordpb.HeartbeatRequest) (*coordpb.HeartbeatResponse, error) {
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.HeartbeatResponse, error) {
		return coordpb.NewStreamingNodeRegistryClient(c).Heartbeat(ctx, req, o...)
	}); handled {
		return resp, err
	}
	term := s.node.EstablishedTerm()
	if term == 0 {
		return nil, s.toStatus(ctx, s.notEstablished())
	}
	sctx, err := s.speaksFor(ctx, s.node.State(), req.NodeId)
	if err != nil {
		return nil, err
	}
	ctx = sctx // what the call proposes is stamped with the caller's node
	n, err := s.liveSession(req.NodeId, req.Epoch)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	held, err := heldOf(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	s.health.HeartbeatHeld(req.NodeId, req.Epoch, fsm.VersionOf(&logpb.AssignmentVersion{
		Global: req.SeenVersion.GetGlobal(), Local: req.SeenVersion.GetLocal()}), held)
	return &coordpb.HeartbeatResponse{CoordTerm: term, State: nodeStateName(n.State), TtlMs: uint64(s.health.TTL().Milliseconds())}, nil
}

// heldOf checks a heartbeat's list of held WALs and returns it as
// pchannel -> term (nil when the node does not report them).
func heldOf(req *coordpb.HeartbeatRequest) (map[string]int64, error) {
	if !req.HeldReported {
		if len(req.Held) > 0 {
			return nil, fmt.Errorf("%w: held lists %d pchannels but held_reported is not set", errInvalid, len(req.Held))
		}
		return nil, nil
	}
	if len(req.Held) > fsm.MaxPChannels {
		return nil, fmt.Errorf("%w: held lists %d pchannels (max %d)", errInvalid, len(req.Held), fsm.MaxPChannels)
	}
	held := make(map[string]int64, len(req.Held))
	for _, h := range req.Held {
		if err := vocab.ValidatePChannelName(h.GetPchannel()); err != nil {
			return nil, fmt.Errorf("%w: held: %v", errInvalid, err)
		}
		if h.Term < 1 {
			return nil, fmt.Errorf("%w: held: pchannel %s has term %d, want a positive term", errInvalid, h.Pchannel, h.Term)
		}
		if _, dup := held[h.Pchannel]; dup {
			return nil, fmt.Errorf("%w: held: pchannel %s is listed twice", errInvalid, h.Pchannel)
		}
		held[h.Pchannel] = h.Term
	}
	return held, nil
}

// RequestDrain is step one of a streaming node's controlled shutdown: the
// node becomes DRAINING and the answer lists the channels it still holds.
// The node calls it again until that list is empty.
func (s *Server) RequestDrain(ctx context.Context, req *coordpb.NodeSessionRequest) (*coordpb.NodeSessionResponse, error) {
	return s.endSession(ctx, req, false)
}

// Deregister ends a streaming node session (the node goes DOWN); a
// session that is already over answers DOWN without error.
func (s *Server) Deregister(ctx context.Context, req *coordpb.NodeSessionRequest) (*coordpb.NodeSessionResponse, error) {
	return s.endSession(ctx, req, true)
}

// endSession drains (controlled shutdown, step one) or deregisters a node.
func (s *Server) endSession(ctx context.Context, req *coordpb.NodeSessionRequest, deregister bool) (*coordpb.NodeSessionResponse, error) {
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.NodeSessionResponse, error) {
		if deregister {
			return coordpb.NewStreamingNodeRegistryClient(c).Deregister(ctx, req, o...)
		}
		return coordpb.NewStreamingNodeRegistryClient(c).RequestDrain(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if s.node.EstablishedTerm() == 0 {
		return nil, s.toStatus(ctx, s.notEstablished())
	}
	// Who may end the session comes first; a record already evicted
	// answers DOWN to a deregistration, as there is nothing to protect.
	if _, known := s.node.State().StreamingNode(req.NodeId); known || !deregister {
		sctx, err := s.speaksFor(ctx, s.node.State(), req.NodeId)
		if err != nil {
			return nil, err
		}
		ctx = sctx // the drain or deregistration is stamped with the caller
	}
	n, err := s.liveSession(req.NodeId, req.Epoch)
	if err != nil {
		if deregister {
			return &coordpb.NodeSessionResponse{State: "DOWN"}, nil // already gone: done
		}
		return nil, s.toStatus(ctx, err)
	}
	if deregister {
		_, err = s.commitNew(ctx, &logpb.MarkStreamingNodeDown{NodeId: n.Id, Epoch: n.Epoch, Reason: "deregistered"})
	} else if n.State != logpb.NodeState_NODE_DRAINING {
		_, err = s.commitNew(ctx, &logpb.SetStreamingNodeDrain{NodeId: n.Id, Draining: true, Reason: "controlled shutdown"})
	}
	if err != nil {
		return nil, err
	}
	st := s.node.State()
	cur, ok := st.StreamingNode(n.Id)
	if !ok {
		// Marking the node DOWN may evict its record at once (the oldest
		// DOWN records go first once MaxDownNodes are kept): it is gone.
		return &coordpb.NodeSessionResponse{State: nodeStateName(logpb.NodeState_NODE_DOWN)}, nil
	}
	return &coordpb.NodeSessionResponse{State: nodeStateName(cur.State), Pchannels: channelsByNode(st)[n.Id]}, nil
}
