package grpcserver

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/fsm"
)

// readState returns the state for a read at the requested consistency, or
// ok=false with resp/err already produced by forwarding.
func readState[Resp any](s *Server, ctx context.Context, c coordpb.ReadConsistency,
	call func(ctx context.Context, conn *grpc.ClientConn, o ...grpc.CallOption) (Resp, error)) (st *fsm.State, resp Resp, done bool, err error) {
	if err := checkConsistency(c); err != nil {
		return nil, resp, true, s.toStatus(ctx, err)
	}
	if c == coordpb.ReadConsistency_STALE {
		return s.node.State(), resp, false, nil
	}
	if resp, handled, err := forward(s, ctx, call); handled {
		return nil, resp, true, err
	}
	st, err = s.node.LinearizableRead(ctx)
	if err != nil {
		return nil, resp, true, s.toStatus(ctx, err)
	}
	return st, resp, false, nil
}

// checkConsistency refuses a consistency value outside the enum (a number
// an older or newer client may send): it is not silently read as either.
func checkConsistency(c coordpb.ReadConsistency) error {
	if _, ok := coordpb.ReadConsistency_name[int32(c)]; !ok {
		return fmt.Errorf("%w: consistency %d is not a known value (LINEARIZABLE or STALE)", errInvalid, c)
	}
	return nil
}

// commit proposes c (built by commands.New, which validated it) on the
// leader and maps an error or a rejection to a status.
func (s *Server) commit(ctx context.Context, c commands.Command) (*logpb.Result, error) {
	res, err := commands.Commit(ctx, s.node, c)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return res, nil
}

// commitNew builds body with commands.New and commits it: for a command a
// handler decides on the leader after its request was validated.
func (s *Server) commitNew(ctx context.Context, body proto.Message) (*logpb.Result, error) {
	c, err := commands.New(body, "")
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return s.commit(ctx, c)
}

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
	for _, p := range st.PChannels() {
		out.Pchannels = append(out.Pchannels, apiPChannel(st, p))
	}
	return out, nil
}

// AddPChannels creates the named PChannels that do not exist yet
// (UNINITIALIZED at term 1) and returns how many were new; idempotent.
// FailedPrecondition before streaming is initialized or beyond the PChannel
// limit (docs/semantics.md#pchannels). Triggers a balance round.
func (s *Server) AddPChannels(ctx context.Context, req *coordpb.AddPChannelsRequest) (*coordpb.AddPChannelsResponse, error) {
	body := &logpb.AddPChannels{Pchannels: req.Names}
	cmd, err := commands.New(body, "")
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AddPChannelsResponse, error) {
		return coordpb.NewChannelsClient(c).AddPChannels(ctx, req, o...)
	}); handled {
		return resp, err
	}
	res, err := s.commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	s.rebalancer.Trigger()
	return &coordpb.AddPChannelsResponse{Added: uint32(res.GetNumber())}, nil
}

// rebalanceWait bounds how long Rebalance waits for the balancer's rounds
// (within the caller's deadline); past it the answer says the round is
// still running.
const rebalanceWait = 10 * time.Second

// reportingRebalancer is a Rebalancer that can say what a round did
// (controller/balancer.Balancer).
type reportingRebalancer interface {
	Rebalance(ctx context.Context) (balancer.Report, error)
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
	if s.node.EstablishedTerm() == 0 {
		return nil, s.toStatus(ctx, s.notEstablished())
	}
	rr, ok := s.rebalancer.(reportingRebalancer)
	if !ok {
		s.rebalancer.Trigger()
		return &coordpb.RebalanceResponse{Reason: "the round was requested; this member cannot report on it"}, nil
	}
	wait := rebalanceWait
	if d, ok := ctx.Deadline(); ok {
		// Answer a little before the caller gives up, so it hears why.
		wait = min(wait, time.Until(d)*9/10)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	rep, err := rr.Rebalance(wctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, s.toStatus(ctx, ctx.Err())
		}
		return &coordpb.RebalanceResponse{Reason: fmt.Sprintf("the round did not finish within %v; it still runs (watch 'coordctl pchannel list')", wait.Round(time.Millisecond))}, nil
	}
	out := &coordpb.RebalanceResponse{Reason: rep.Reason, RoundDone: true}
	if !rep.NextMove.IsZero() {
		out.NextMoveUnixMs = rep.NextMove.UnixMilli()
	}
	for _, m := range rep.Moves {
		out.Moves = append(out.Moves, &coordpb.PChannelMove{Pchannel: m.PChannel, FromNodeId: m.From, ToNodeId: m.To, Term: m.Term})
	}
	return out, nil
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
		if n.State == logpb.NodeState_NODE_DOWN && !req.IncludeDown {
			continue
		}
		an := apiNode(n, held[n.Id], s.lastSeenMs(n.Id))
		if an.LastHeartbeatMsAgo >= 0 {
			an.NodeTtlMs = s.health.TTL().Milliseconds()
		}
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
	reason := req.Reason
	if reason == "" {
		reason = "operator request"
	}
	body := &logpb.SetStreamingNodeDrain{NodeId: req.NodeId, Draining: draining, Reason: reason}
	cmd, err := commands.New(body, "")
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
	if _, err := s.commit(ctx, cmd); err != nil {
		return nil, err
	}
	st := s.node.State()
	n, ok := st.StreamingNode(req.NodeId)
	if !ok { // marked DOWN and evicted since the commit
		return nil, s.toStatus(ctx, fmt.Errorf("%w: streaming node %d is gone", errNotFound, req.NodeId))
	}
	return &coordpb.DrainNodeResponse{Node: apiNode(n, channelsByNode(st)[n.Id], s.lastSeenMs(n.Id))}, nil
}

// AllocVirtualChannels places a collection's shards on distinct, least-loaded
// PChannels and returns the VChannel names (docs/semantics.md#vchannels). A
// repeat with the same count returns the first placement; FailedPrecondition
// for a different count, on a replication secondary, or when too few
// PChannels are available. Deduplicated by request ID.
func (s *Server) AllocVirtualChannels(ctx context.Context, req *coordpb.AllocVirtualChannelsRequest) (*coordpb.AllocVirtualChannelsResponse, error) {
	body := &logpb.AllocVirtualChannels{CollectionId: req.CollectionId, Count: req.Count}
	cmd, err := commands.New(body, req.RequestId)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AllocVirtualChannelsResponse, error) {
		return coordpb.NewChannelsClient(c).AllocVirtualChannels(ctx, req, o...)
	}); handled {
		return resp, err
	}
	res, err := s.commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &coordpb.AllocVirtualChannelsResponse{Vchannels: res.GetVchannels().GetVchannels()}, nil
}

// DropVirtualChannels forgets a collection's VChannels
// (docs/semantics.md#vchannels); NotFound when it has none. Deduplicated by
// request ID.
func (s *Server) DropVirtualChannels(ctx context.Context, req *coordpb.DropVirtualChannelsRequest) (*coordpb.DropVirtualChannelsResponse, error) {
	body := &logpb.DropVirtualChannels{CollectionId: req.CollectionId}
	cmd, err := commands.New(body, req.RequestId)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.DropVirtualChannelsResponse, error) {
		return coordpb.NewChannelsClient(c).DropVirtualChannels(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if _, err := s.commit(ctx, cmd); err != nil {
		return nil, err
	}
	return &coordpb.DropVirtualChannelsResponse{}, nil
}

// ListVirtualChannels returns the VChannels of one collection (NotFound
// when it has none) or, with collection_id 0, of every collection.
// Linearizable unless the request asks for a stale read.
func (s *Server) ListVirtualChannels(ctx context.Context, req *coordpb.ListVirtualChannelsRequest) (*coordpb.ListVirtualChannelsResponse, error) {
	if req.CollectionId < 0 {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: collection_id must not be negative", errInvalid))
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
			return nil, s.toStatus(ctx, fmt.Errorf("%w: collection %d has no vchannels", errNotFound, req.CollectionId))
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
// (docs/semantics.md#replication-configuration); see
// updateReplicateConfiguration for how. InvalidArgument for a configuration
// this cluster cannot take; an equal configuration succeeds at once.
func (s *Server) UpdateReplicateConfiguration(ctx context.Context, req *coordpb.UpdateReplicateConfigurationRequest) (*coordpb.UpdateReplicateConfigurationResponse, error) {
	body := &logpb.UpdateReplicateConfiguration{Config: logReplicateConfig(req.Config)}
	if _, err := commands.New(body, ""); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.UpdateReplicateConfigurationResponse, error) {
		return coordpb.NewChannelsClient(c).UpdateReplicateConfiguration(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if err := s.updateReplicateConfiguration(ctx, body.Config); err != nil {
		return nil, err
	}
	return &coordpb.UpdateReplicateConfigurationResponse{}, nil
}

// updateReplicateConfiguration (docs/semantics.md#replication-configuration):
// an equal configuration is done already; a secondary refuses at once (its
// configuration comes from the primary; ResetReplicateRole is the
// operator's way out); a primary broadcasts AlterReplicateConfig under the
// exclusive Cluster key to every PChannel. The broadcaster checks the
// configuration again once it holds that key, against the configuration
// installed then, and the broadcast's callback installs it once every
// PChannel has acked. The check here only answers early.
func (s *Server) updateReplicateConfiguration(ctx context.Context, cfg *logpb.ReplicateConfiguration) error {
	st := s.node.State()
	if cur := st.ReplicateConfiguration(); cur != nil && proto.Equal(cur, cfg) {
		return nil
	}
	if !st.IsPrimary() {
		return s.toStatus(ctx, fmt.Errorf("%w: cluster %s is a replication secondary: change the configuration on the primary, "+
			"or make this cluster a primary again with ResetReplicateRole (coordctl replicate reset --reason ...)", errPrecondition, st.ChannelsMeta().ClusterId))
	}
	if err := s.node.State().CheckReplicateConfiguration(cfg); err != nil {
		return s.toStatus(ctx, fmt.Errorf("%w: %v", errInvalid, err))
	}
	if s.broadcasts == nil {
		_, err := s.commitNew(ctx, &logpb.UpdateReplicateConfiguration{Config: cfg})
		return err
	}
	payload, err := proto.Marshal(cfg)
	if err != nil {
		return s.toStatus(ctx, err)
	}
	_, err = s.broadcasts.Broadcast(ctx, broadcaster.Request{
		MessageType:  commands.MsgAlterReplicateConfig,
		Payload:      payload,
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_CLUSTER}},
	})
	if err != nil {
		return s.toStatus(ctx, err)
	}
	if t := s.node.State().ReplicateConfiguration(); t == nil || !proto.Equal(t, cfg) {
		return status.Error(codes.FailedPrecondition, "the configuration broadcast completed but was not installed (see coordctl broadcast list)")
	}
	return nil
}

// ResetReplicateRole makes a secondary cluster a primary again: it commits
// ResetReplicateRole, whose Apply installs a configuration listing only
// this cluster, with the PChannels the installed configuration gives it,
// and no topology. It is an operator's decision (the reason is logged and
// recorded in the log); a primary is refused (FailedPrecondition), since
// its configuration is changed with UpdateReplicateConfiguration. Apply
// runs the guard against the state it applies to, so a reset racing a
// configuration change cannot overwrite it; the reads here only log.
func (s *Server) ResetReplicateRole(ctx context.Context, req *coordpb.ResetReplicateRoleRequest) (*coordpb.GetReplicateConfigurationResponse, error) {
	cmd, err := commands.New(&logpb.ResetReplicateRole{Reason: req.Reason}, "")
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetReplicateConfigurationResponse, error) {
		return coordpb.NewChannelsClient(c).ResetReplicateRole(ctx, req, o...)
	}); handled {
		return resp, err
	}
	st := s.node.State()
	self := st.ChannelsMeta().ClusterId
	s.logger.Warn("resetting the replication role to primary", "cluster", self, "reason", req.Reason,
		"previous", st.ReplicateConfiguration().String())
	res, err := s.commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	cfg := res.GetReplicateConfig()
	s.logger.Warn("replication role reset: this cluster is a primary", "cluster", self, "reason", req.Reason, "config", cfg.String())
	return &coordpb.GetReplicateConfigurationResponse{Config: apiReplicateConfig(cfg), ClusterId: self, Role: "PRIMARY"}, nil
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
		Config: apiReplicateConfig(st.ReplicateConfiguration()), ClusterId: st.ChannelsMeta().ClusterId, Role: role,
	}, nil
}

// ReportAssignmentError is a streaming node's report that the WAL of an
// ASSIGNED PChannel broke at a term: the channel becomes UNAVAILABLE and is
// reassigned (docs/semantics.md#pchannel-terms). A report about another term
// changes nothing and answers marked=false.
func (s *Server) ReportAssignmentError(ctx context.Context, req *coordpb.ReportAssignmentErrorRequest) (*coordpb.ReportAssignmentErrorResponse, error) {
	body := &logpb.MarkPChannelsUnavailable{Channels: []*logpb.PChannelTerm{{Pchannel: req.Pchannel, Term: req.Term,
		Reason: commands.TruncateReason(req.Error)}}}
	cmd, err := commands.New(body, "")
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ReportAssignmentErrorResponse, error) {
		return coordpb.NewChannelsClient(c).ReportAssignmentError(ctx, req, o...)
	}); handled {
		return resp, err
	}
	res, err := s.commit(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &coordpb.ReportAssignmentErrorResponse{Marked: res.GetNumber() > 0}, nil
}
