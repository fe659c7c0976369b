package grpcserver

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/vocab"
)

// Broadcast delivers one DDL/DCL message to its targets exactly once and
// returns when its ack callback has run (docs/semantics.md#broadcaster). With
// no targets the broadcaster chooses them. InvalidArgument for a malformed
// request or a built-in payload its callback cannot read (checked before
// forwarding); FailedPrecondition on a replication secondary;
// DeadlineExceeded when a resource key could not be had in time (nothing
// was created). A deadline that ends after the task was created ends only
// the wait. A repeat with the same idempotency key returns the original with
// duplicated=true.
func (s *Server) Broadcast(ctx context.Context, req *coordpb.BroadcastRequest) (*coordpb.BroadcastResponse, error) {
	br, err := broadcaster.NewRequest(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.BroadcastResponse, error) {
		return coordpb.NewBroadcasterClient(c).Broadcast(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if s.broadcasts == nil {
		return nil, status.Error(codes.Unavailable, "broadcaster not configured on this node")
	}
	res, err := s.broadcasts.Broadcast(ctx, br)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return res.Response(), nil
}

// Ack records a streaming node's checkpoints for an ack_sync_up broadcast
// (docs/semantics.md#broadcast-acks). The request names the node's session
// (node_id, epoch); Apply accepts only acks from the live owner of each
// channel at its current term. Repeated and late acks are no-ops.
func (s *Server) Ack(ctx context.Context, req *coordpb.AckRequest) (*coordpb.AckResponse, error) {
	ack, err := broadcaster.NewAck(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AckResponse, error) {
		return coordpb.NewBroadcasterClient(c).Ack(ctx, req, o...)
	}); handled {
		return resp, err
	}
	caller, err := s.speaksFor(ctx, req.NodeId)
	if err != nil {
		return nil, err
	}
	if err := s.ack(ctx, ack.SpokenFor(caller)); err != nil {
		return nil, err
	}
	return &coordpb.AckResponse{}, nil
}

// ack hands an ack to the broadcaster, or commits it when this node has
// none (Apply accepts it only from the channel's owner either way).
func (s *Server) ack(ctx context.Context, ack broadcaster.Ack) error {
	if s.broadcasts == nil {
		return s.toStatus(ctx, broadcaster.CommitAck(ctx, s.node, ack))
	}
	return s.toStatus(ctx, s.broadcasts.Ack(ctx, ack))
}

// GetBroadcast returns one task: state, targets, acks, callback attempts and
// last error (docs/semantics.md#broadcast-lifecycle). NotFound when it never
// existed or its tombstone was pruned. Linearizable unless the request asks
// for a stale read.
func (s *Server) GetBroadcast(ctx context.Context, req *coordpb.GetBroadcastRequest) (*coordpb.BroadcastInfo, error) {
	if req.BroadcastId == 0 {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "broadcast_id must be positive"))
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.BroadcastInfo, error) {
		return coordpb.NewBroadcasterClient(c).GetBroadcast(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	info, ok := broadcaster.Info(st, req.BroadcastId)
	if !ok {
		return nil, s.toStatus(ctx, vocab.Errorf(errNotFound, "broadcast %d is unknown (never created, or its tombstone was pruned)", req.BroadcastId))
	}
	return info, nil
}

// ListBroadcasts returns the newest tasks (at most limit, default 1000;
// pending only with pending_only). Linearizable unless the request asks for
// a stale read.
func (s *Server) ListBroadcasts(ctx context.Context, req *coordpb.ListBroadcastsRequest) (*coordpb.ListBroadcastsResponse, error) {
	if req.Limit > 10000 {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "limit must be at most 10000"))
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ListBroadcastsResponse, error) {
		return coordpb.NewBroadcasterClient(c).ListBroadcasts(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = 1000
	}
	return &coordpb.ListBroadcastsResponse{Broadcasts: broadcaster.Infos(st, req.PendingOnly, limit)}, nil
}

// RetryBroadcast makes the leader retry a pending task's appends and callback
// now instead of after its backoff. NotFound for an unknown task,
// FailedPrecondition for a finished one (the broadcaster decides).
func (s *Server) RetryBroadcast(ctx context.Context, req *coordpb.RetryBroadcastRequest) (*coordpb.RetryBroadcastResponse, error) {
	if req.BroadcastId == 0 {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "broadcast_id must be positive"))
	}
	return operateOnBroadcast(s, ctx, req, coordpb.BroadcasterClient.RetryBroadcast, &coordpb.RetryBroadcastResponse{},
		func(b routines.Broadcasts) error { return b.Retry(req.BroadcastId) })
}

// AbandonBroadcast tombstones a pending task without its callback, keeping
// the reason, and releases its resource keys (docs/semantics.md#broadcast-lifecycle).
// NotFound for an unknown task, FailedPrecondition for a finished one.
func (s *Server) AbandonBroadcast(ctx context.Context, req *coordpb.AbandonBroadcastRequest) (*coordpb.AbandonBroadcastResponse, error) {
	if err := broadcaster.CheckAbandon(req); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return operateOnBroadcast(s, ctx, req, coordpb.BroadcasterClient.AbandonBroadcast, &coordpb.AbandonBroadcastResponse{},
		func(b routines.Broadcasts) error { return b.Abandon(ctx, req.BroadcastId, req.Reason) })
}

// operateOnBroadcast serves an operator's action on one task (Retry,
// Abandon) once its request was checked: forwarded to the leader, then
// act on the leader's broadcaster, which answers for an unknown or
// finished task.
func operateOnBroadcast[Req, Resp any](s *Server, ctx context.Context, req Req,
	remote func(coordpb.BroadcasterClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
	done Resp, act func(routines.Broadcasts) error) (Resp, error) {
	var none Resp
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (Resp, error) {
		return remote(coordpb.NewBroadcasterClient(c), ctx, req, o...)
	}); handled {
		return resp, err
	}
	if s.broadcasts == nil {
		return none, status.Error(codes.Unavailable, "broadcaster not configured on this node")
	}
	if err := act(s.broadcasts); err != nil {
		return none, s.toStatus(ctx, err)
	}
	return done, nil
}
