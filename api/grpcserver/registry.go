package grpcserver

import (
	"context"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/controller/datapath"
)

// The streaming-node registry (docs/semantics.md#streaming-nodes); the
// session rules are datapath.Service's.

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
	reg, err := datapath.NewRegistration(req, bound)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RegisterStreamingNodeResponse, error) {
		return coordpb.NewStreamingNodeRegistryClient(c).RegisterStreamingNode(ctx, req, o...)
	}); handled {
		return resp, err
	}
	r, err := s.dataPath.Register(ctx, reg)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.RegisterStreamingNodeResponse{NodeId: r.NodeId, Epoch: r.Epoch,
		RegisteredVersion: &coordpb.Version{Global: r.Version.GetGlobal(), Local: r.Version.GetLocal()}}, nil
}

// Heartbeat keeps a streaming node session alive on the leader (leader memory
// only, never in the log) and answers with the coordinator term (a fence,
// docs/architecture.md#fencing), the node's state and the TTL. NotFound when
// the session is unknown, DOWN or of another epoch: the node must register
// again.
func (s *Server) Heartbeat(ctx context.Context, req *coordpb.HeartbeatRequest) (*coordpb.HeartbeatResponse, error) {
	h, err := datapath.NewHeartbeat(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.HeartbeatResponse, error) {
		return coordpb.NewStreamingNodeRegistryClient(c).Heartbeat(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if _, err := s.speaksFor(ctx, h.Node); err != nil { // a heartbeat proposes nothing
		return nil, err
	}
	r, err := s.dataPath.Heartbeat(ctx, h)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.HeartbeatResponse{CoordTerm: r.CoordTerm, State: channels.NodeStateName(r.State), TtlMs: r.TTLMs}, nil
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

// endSession drains (controlled shutdown, step one) or deregisters a node;
// the service decides when the caller must speak for the node.
func (s *Server) endSession(ctx context.Context, req *coordpb.NodeSessionRequest, deregister bool) (*coordpb.NodeSessionResponse, error) {
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.NodeSessionResponse, error) {
		if deregister {
			return coordpb.NewStreamingNodeRegistryClient(c).Deregister(ctx, req, o...)
		}
		return coordpb.NewStreamingNodeRegistryClient(c).RequestDrain(ctx, req, o...)
	}); handled {
		return resp, err
	}
	r, err := s.dataPath.EndSession(ctx, datapath.Session{Node: req.NodeId, Epoch: req.Epoch}, deregister, s.speaksFor)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.NodeSessionResponse{State: channels.NodeStateName(r.State), Pchannels: r.PChannels}, nil
}
