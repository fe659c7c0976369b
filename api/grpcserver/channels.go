package grpcserver

import (
	"context"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/vocab"
)

// ListPChannels returns every PChannel with its term, state, owner and
// assignment history, the CChannel and the assignment version
// (docs/semantics.md#pchannels). Linearizable unless the request asks for a
// stale read.
func (s *Server) ListPChannels(ctx context.Context, req *coordpb.ListPChannelsRequest) (*coordpb.ListPChannelsResponse, error) {
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ListPChannelsResponse, error) {
		return coordpb.NewChannelsClient(c).ListPChannels(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	out := &coordpb.ListPChannelsResponse{Cchannel: st.CChannel(), Version: apiVersion(st.AssignmentVersion())}
	owners := map[uint64]string{}
	for _, p := range st.PChannels() {
		ap := channels.PChannelInfo(st, p)
		ap.OwnerState = s.ownerState(st, p.NodeId, owners)
		out.Pchannels = append(out.Pchannels, ap)
	}
	return out, nil
}

// AddPChannels creates the named PChannels that do not exist yet
// (UNINITIALIZED at term 1) and returns how many were new; idempotent.
// FailedPrecondition before streaming is initialized or beyond the PChannel
// limit (docs/semantics.md#pchannels). Triggers a balance round.
func (s *Server) AddPChannels(ctx context.Context, req *coordpb.AddPChannelsRequest) (*coordpb.AddPChannelsResponse, error) {
	r, err := channels.NewAddPChannels(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AddPChannelsResponse, error) {
		return coordpb.NewChannelsClient(c).AddPChannels(ctx, req, o...)
	}); handled {
		return resp, err
	}
	added, err := s.channels.AddPChannels(ctx, r)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.AddPChannelsResponse{Added: added}, nil
}

// Rebalance asks the leader's balancer for a round now
// (docs/semantics.md#pchannel-assignment) and waits for it: the answer
// lists what moved, or why nothing did and when a move the minimum
// rebalance interval blocks becomes possible. Unavailable when no
// established leader can take the request.
func (s *Server) Rebalance(ctx context.Context, req *coordpb.RebalanceRequest) (*coordpb.RebalanceResponse, error) {
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RebalanceResponse, error) {
		return coordpb.NewChannelsClient(c).Rebalance(ctx, req, o...)
	}); handled {
		return resp, err
	}
	res, err := s.channels.Rebalance(ctx)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return apiRebalance(res), nil
}

// ListNodes returns the streaming nodes (DOWN ones only with include_down)
// with the PChannels each holds and, on the leader, the age of its last
// heartbeat (docs/semantics.md#streaming-nodes). Linearizable unless the
// request asks for a stale read.
func (s *Server) ListNodes(ctx context.Context, req *coordpb.ListNodesRequest) (*coordpb.ListNodesResponse, error) {
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ListNodesResponse, error) {
		return coordpb.NewChannelsClient(c).ListNodes(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	held := channelsByNode(st)
	out := &coordpb.ListNodesResponse{}
	for _, n := range st.StreamingNodes() {
		if channels.IsDown(n) && !req.IncludeDown {
			continue
		}
		an := channels.NodeInfo(n, held[n.Id], s.lastSeenMs(n.Id))
		s.judgeSilence(an)
		out.Nodes = append(out.Nodes, an)
	}
	return out, nil
}

// lastSeenMs is the heartbeat age on the leader, -1 elsewhere or unknown.
func (s *Server) lastSeenMs(node uint64) int64 {
	if s.node.EstablishedTerm() == 0 {
		return -1
	}
	if d, ok := s.health.LastSeen(node); ok {
		return d.Milliseconds()
	}
	return -1
}

// DrainNode marks a live streaming node DRAINING: it gets no new channels and
// the balancer moves its channels off (docs/semantics.md#streaming-nodes).
// NotFound for an unknown node, FailedPrecondition for a DOWN one; draining a
// draining node is a no-op.
func (s *Server) DrainNode(ctx context.Context, req *coordpb.DrainNodeRequest) (*coordpb.DrainNodeResponse, error) {
	return s.setDrain(ctx, req, true)
}

// UndrainNode returns a DRAINING node to UP, with the same errors as
// DrainNode.
func (s *Server) UndrainNode(ctx context.Context, req *coordpb.DrainNodeRequest) (*coordpb.DrainNodeResponse, error) {
	return s.setDrain(ctx, req, false)
}

func (s *Server) setDrain(ctx context.Context, req *coordpb.DrainNodeRequest, draining bool) (*coordpb.DrainNodeResponse, error) {
	r, err := channels.NewDrain(req, draining)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.DrainNodeResponse, error) {
		if draining {
			return coordpb.NewChannelsClient(c).DrainNode(ctx, req, o...)
		}
		return coordpb.NewChannelsClient(c).UndrainNode(ctx, req, o...)
	}); handled {
		return resp, err
	}
	v, err := s.channels.SetDrain(ctx, r)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	an := channels.NodeInfo(v.Node, v.PChannels, s.lastSeenMs(v.Node.Id))
	s.judgeSilence(an)
	return &coordpb.DrainNodeResponse{Node: an}, nil
}

// AllocVirtualChannels places a collection's shards on distinct, least-loaded
// PChannels and returns the VChannel names (docs/semantics.md#vchannels). A
// repeat with the same count returns the first placement; FailedPrecondition
// for a different count, on a replication secondary, or when too few
// PChannels are available. Deduplicated by request ID.
func (s *Server) AllocVirtualChannels(ctx context.Context, req *coordpb.AllocVirtualChannelsRequest) (*coordpb.AllocVirtualChannelsResponse, error) {
	r, err := channels.NewAllocVChannels(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AllocVirtualChannelsResponse, error) {
		return coordpb.NewChannelsClient(c).AllocVirtualChannels(ctx, req, o...)
	}); handled {
		return resp, err
	}
	names, err := s.channels.AllocVChannels(ctx, r)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.AllocVirtualChannelsResponse{Vchannels: names}, nil
}

// DropVirtualChannels forgets a collection's VChannels
// (docs/semantics.md#vchannels); NotFound when it has none. Deduplicated by
// request ID.
func (s *Server) DropVirtualChannels(ctx context.Context, req *coordpb.DropVirtualChannelsRequest) (*coordpb.DropVirtualChannelsResponse, error) {
	r, err := channels.NewDropVChannels(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.DropVirtualChannelsResponse, error) {
		return coordpb.NewChannelsClient(c).DropVirtualChannels(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if err := s.channels.DropVChannels(ctx, r); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.DropVirtualChannelsResponse{}, nil
}

// ListVirtualChannels returns the VChannels of one collection (NotFound
// when it has none) or, with collection_id 0, of every collection.
// Linearizable unless the request asks for a stale read.
func (s *Server) ListVirtualChannels(ctx context.Context, req *coordpb.ListVirtualChannelsRequest) (*coordpb.ListVirtualChannelsResponse, error) {
	if req.CollectionId < 0 {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "collection_id must not be negative"))
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ListVirtualChannelsResponse, error) {
		return coordpb.NewChannelsClient(c).ListVirtualChannels(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	out := &coordpb.ListVirtualChannelsResponse{}
	if req.CollectionId != 0 {
		c, ok := st.Collection(req.CollectionId)
		if !ok {
			return nil, s.toStatus(ctx, vocab.Errorf(errNotFound, "collection %d has no vchannels", req.CollectionId))
		}
		out.Collections = append(out.Collections, &coordpb.CollectionVChannels{CollectionId: c.CollectionId, Vchannels: c.Vchannels})
		return out, nil
	}
	for _, c := range st.Collections() {
		out.Collections = append(out.Collections, &coordpb.CollectionVChannels{CollectionId: c.CollectionId, Vchannels: c.Vchannels})
	}
	return out, nil
}

// UpdateReplicateConfiguration installs a replication configuration
// (docs/semantics.md#replication-configuration; the leader's
// channels.Service decides how). InvalidArgument for a configuration this
// cluster cannot take; an equal configuration succeeds at once;
// FailedPrecondition on a secondary.
func (s *Server) UpdateReplicateConfiguration(ctx context.Context, req *coordpb.UpdateReplicateConfigurationRequest) (*coordpb.UpdateReplicateConfigurationResponse, error) {
	cfg, err := channels.NewReplicateConfig(req.Config)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.UpdateReplicateConfigurationResponse, error) {
		return coordpb.NewChannelsClient(c).UpdateReplicateConfiguration(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if err := s.channels.UpdateReplicateConfiguration(ctx, cfg); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.UpdateReplicateConfigurationResponse{}, nil
}

// ResetReplicateRole makes a secondary cluster a primary again
// (channels.Service.ResetReplicateRole): an operator's decision, with a
// reason. A primary is refused (FailedPrecondition), since its
// configuration is changed with UpdateReplicateConfiguration.
func (s *Server) ResetReplicateRole(ctx context.Context, req *coordpb.ResetReplicateRoleRequest) (*coordpb.GetReplicateConfigurationResponse, error) {
	r, err := channels.NewResetRole(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetReplicateConfigurationResponse, error) {
		return coordpb.NewChannelsClient(c).ResetReplicateRole(ctx, req, o...)
	}); handled {
		return resp, err
	}
	res, err := s.channels.ResetReplicateRole(ctx, r)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.GetReplicateConfigurationResponse{Config: channels.APIReplicateConfig(res.Config), ClusterId: res.ClusterID, Role: "PRIMARY"}, nil
}

// GetReplicateConfiguration returns the installed replication
// configuration (empty when none), this cluster's ID and whether it is
// primary, read linearizably.
func (s *Server) GetReplicateConfiguration(ctx context.Context, req *coordpb.GetReplicateConfigurationRequest) (*coordpb.GetReplicateConfigurationResponse, error) {
	st, resp, done, err := readState(s, ctx, coordpb.ReadConsistency_LINEARIZABLE, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetReplicateConfigurationResponse, error) {
		return coordpb.NewChannelsClient(c).GetReplicateConfiguration(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	role := "PRIMARY"
	if !st.IsPrimary() {
		role = "SECONDARY"
	}
	return &coordpb.GetReplicateConfigurationResponse{
		Config: channels.APIReplicateConfig(st.ReplicateConfiguration()), ClusterId: st.ChannelsMeta().ClusterId, Role: role,
	}, nil
}

// ReportAssignmentError is a streaming node's report that the WAL of an
// ASSIGNED PChannel broke at a term: the channel becomes UNAVAILABLE and is
// reassigned (docs/semantics.md#pchannel-terms). A report about another term
// changes nothing and answers marked=false.
func (s *Server) ReportAssignmentError(ctx context.Context, req *coordpb.ReportAssignmentErrorRequest) (*coordpb.ReportAssignmentErrorResponse, error) {
	r, err := channels.NewAssignmentError(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ReportAssignmentErrorResponse, error) {
		return coordpb.NewChannelsClient(c).ReportAssignmentError(ctx, req, o...)
	}); handled {
		return resp, err
	}
	marked, err := s.channels.ReportAssignmentError(ctx, r)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.ReportAssignmentErrorResponse{Marked: marked}, nil
}
