package grpcserver

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/vocab"
)

// Broadcasts is the leader's broadcaster as the API uses it.
type Broadcasts interface {
	// Broadcast commits a task and waits until it is a TOMBSTONE
	// (broadcaster.Manager.Broadcast).
	Broadcast(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error)
	// Ack commits a streaming node's ack of an ack_sync_up task, proposed
	// with opts (the caller's node, commands.CallerNode).
	Ack(ctx context.Context, ack *logpb.AckBroadcast, opts ...commands.Option) error
	// Retry wakes a pending task's scheduler now.
	Retry(id uint64) error
	// Abandon tombstones a pending task without its callback.
	Abandon(ctx context.Context, id uint64, reason string) error
}

// WithBroadcaster sets the broadcaster (default: none; Broadcast answers
// Unavailable).
func WithBroadcaster(b Broadcasts) Option { return func(s *Server) { s.broadcasts = b } }

var domainsByName = map[string]logpb.ResourceDomain{
	"CLUSTER": logpb.ResourceDomain_RK_CLUSTER, "DB_NAME": logpb.ResourceDomain_RK_DB_NAME,
	"COLLECTION_NAME": logpb.ResourceDomain_RK_COLLECTION_NAME, "PRIVILEGE": logpb.ResourceDomain_RK_PRIVILEGE,
	"SNAPSHOT_NAME": logpb.ResourceDomain_RK_SNAPSHOT_NAME, "IMPORT_JOB_ID": logpb.ResourceDomain_RK_IMPORT_JOB_ID,
}

// domainName is the API name of a resource key domain (the inverse of
// domainsByName; TestDomainNames keeps the two in step).
func domainName(d logpb.ResourceDomain) string {
	switch d {
	case logpb.ResourceDomain_RK_CLUSTER:
		return "CLUSTER"
	case logpb.ResourceDomain_RK_DB_NAME:
		return "DB_NAME"
	case logpb.ResourceDomain_RK_COLLECTION_NAME:
		return "COLLECTION_NAME"
	case logpb.ResourceDomain_RK_PRIVILEGE:
		return "PRIVILEGE"
	case logpb.ResourceDomain_RK_SNAPSHOT_NAME:
		return "SNAPSHOT_NAME"
	case logpb.ResourceDomain_RK_IMPORT_JOB_ID:
		return "IMPORT_JOB_ID"
	}
	return d.String()
}

// broadcastRequest validates an API request and converts it.
func broadcastRequest(req *coordpb.BroadcastRequest) (broadcaster.Request, error) {
	out := broadcaster.Request{MessageType: req.MessageType, Payload: req.Payload, VChannels: req.Vchannels, AckSyncUp: req.AckSyncUp,
		RequestID: req.RequestId}
	for _, k := range req.ResourceKeys {
		d, ok := domainsByName[strings.ToUpper(k.Domain)]
		if !ok {
			return out, fmt.Errorf("%w: unknown resource key domain %q", errInvalid, k.Domain)
		}
		out.ResourceKeys = append(out.ResourceKeys, &logpb.ResourceKey{Domain: d, Key: k.Key, Shared: k.Shared})
	}
	if ik := req.IdempotencyKey; ik != nil {
		var key string
		var err error
		switch strings.ToUpper(ik.Scope) {
		case "CLUSTER":
			if ik.ScopeId != 0 {
				return out, fmt.Errorf("%w: a CLUSTER idempotency scope takes no scope_id, got %d", errInvalid, ik.ScopeId)
			}
			key, err = vocab.ClusterScopedKey(ik.Key)
		case "DATABASE":
			key, err = vocab.DatabaseScopedKey(ik.ScopeId, ik.Key)
		case "COLLECTION":
			key, err = vocab.CollectionScopedKey(ik.ScopeId, ik.Key)
		default:
			err = fmt.Errorf("%w: idempotency scope must be CLUSTER, DATABASE or COLLECTION, got %q", errInvalid, ik.Scope)
		}
		if err != nil {
			return out, err
		}
		out.IdempotencyKey = key
	}
	if err := broadcaster.CheckRequest(out); err != nil {
		return out, err
	}
	return out, nil
}

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
	br, err := broadcastRequest(req)
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
	return apiBroadcastResult(res), nil
}

func apiBroadcastResult(res broadcaster.Result) *coordpb.BroadcastResponse {
	out := &coordpb.BroadcastResponse{BroadcastId: res.BroadcastID, Duplicated: res.Duplicated, LockWaitMs: res.LockWait.Milliseconds()}
	for _, cp := range res.Checkpoints {
		out.AppendResults = append(out.AppendResults, apiCheckpoint(cp))
	}
	return out
}

func apiCheckpoint(cp *logpb.VChannelCheckpoint) *coordpb.Checkpoint {
	return &coordpb.Checkpoint{Vchannel: cp.Vchannel, Term: cp.Term, Offset: cp.Offset, TimeTick: cp.TimeTick}
}

// Ack records a streaming node's checkpoints for an ack_sync_up broadcast
// (docs/semantics.md#broadcast-acks). The request names the node's session
// (node_id, epoch); Apply accepts only acks from the live owner of each
// channel at its current term. Repeated and late acks are no-ops.
func (s *Server) Ack(ctx context.Context, req *coordpb.AckRequest) (*coordpb.AckResponse, error) {
	ack, cmd, err := ackRequest(req)
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
	if err := s.ack(ctx, caller, ack, cmd); err != nil {
		return nil, err
	}
	return &coordpb.AckResponse{}, nil
}

// ackRequest checks an ack and builds its command.
func ackRequest(req *coordpb.AckRequest) (*logpb.AckBroadcast, commands.Command, error) {
	if req.NodeId == 0 || req.Epoch == 0 {
		return nil, commands.Command{}, fmt.Errorf("%w: node_id and epoch are required: an ack comes from the streaming node that owns the channel", errInvalid)
	}
	var cps []*logpb.VChannelCheckpoint
	for _, cp := range req.Checkpoints {
		cps = append(cps, &logpb.VChannelCheckpoint{Vchannel: cp.Vchannel, Term: cp.Term, Offset: cp.Offset, TimeTick: cp.TimeTick})
	}
	ack := &logpb.AckBroadcast{BroadcastId: req.BroadcastId, Checkpoints: cps, FromNode: req.NodeId, FromEpoch: req.Epoch}
	cmd, err := commands.New(ack, "")
	return ack, cmd, err
}

// ack hands an ack to the broadcaster, or commits it when this node has
// none (Apply accepts it only from the channel's owner either way),
// stamped with the caller's node identity (speaksFor).
func (s *Server) ack(ctx context.Context, caller uint64, ack *logpb.AckBroadcast, cmd commands.Command) error {
	if s.broadcasts == nil {
		_, err := s.commit(ctx, cmd, commands.CallerNode(caller))
		return err
	}
	return s.toStatus(ctx, s.broadcasts.Ack(ctx, ack, commands.CallerNode(caller)))
}

func apiBroadcastInfo(t *logpb.BroadcastTask) *coordpb.BroadcastInfo {
	out := &coordpb.BroadcastInfo{
		BroadcastId: t.Id, MessageType: t.MessageType, State: strings.TrimPrefix(t.State.String(), "BROADCAST_"),
		Vchannels: t.Vchannels, AckSyncUp: t.AckSyncUp, IdempotencyKey: t.IdempotencyKey, CreatedUnixMs: t.CreatedMs,
		TombstonedUnixMs: t.TombstonedMs, CallbackAttempts: t.CallbackAttempts, LastError: t.LastError,
		AbandonedReason: t.AbandonedReason, PayloadBytes: uint32(len(t.Payload)),
	}
	for _, k := range t.ResourceKeys {
		out.ResourceKeys = append(out.ResourceKeys, &coordpb.ResourceKey{Domain: domainName(k.Domain), Key: k.Key, Shared: k.Shared})
	}
	for _, cp := range t.Acked {
		out.Acked = append(out.Acked, apiCheckpoint(cp))
	}
	return out
}

// GetBroadcast returns one task: state, targets, acks, callback attempts and
// last error (docs/semantics.md#broadcast-lifecycle). NotFound when it never
// existed or its tombstone was pruned. Linearizable unless the request asks
// for a stale read.
func (s *Server) GetBroadcast(ctx context.Context, req *coordpb.GetBroadcastRequest) (*coordpb.BroadcastInfo, error) {
	if req.BroadcastId == 0 {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: broadcast_id must be positive", errInvalid))
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.BroadcastInfo, error) {
		return coordpb.NewBroadcasterClient(c).GetBroadcast(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	t, ok := st.BroadcastTask(req.BroadcastId)
	if !ok {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: broadcast %d is unknown (never created, or its tombstone was pruned)", errNotFound, req.BroadcastId))
	}
	return apiBroadcastInfo(t), nil
}

// ListBroadcasts returns the newest tasks (at most limit, default 1000;
// pending only with pending_only). Linearizable unless the request asks for
// a stale read.
func (s *Server) ListBroadcasts(ctx context.Context, req *coordpb.ListBroadcastsRequest) (*coordpb.ListBroadcastsResponse, error) {
	if req.Limit > 10000 {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: limit must be at most 10000", errInvalid))
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ListBroadcastsResponse, error) {
		return coordpb.NewBroadcasterClient(c).ListBroadcasts(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	tasks := st.BroadcastTasks()
	if req.PendingOnly {
		tasks = st.PendingBroadcasts()
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = 1000
	}
	if len(tasks) > limit {
		tasks = tasks[len(tasks)-limit:] // the newest
	}
	out := &coordpb.ListBroadcastsResponse{}
	for _, t := range tasks {
		out.Broadcasts = append(out.Broadcasts, apiBroadcastInfo(t))
	}
	return out, nil
}

// RetryBroadcast makes the leader retry a pending task's appends and callback
// now instead of after its backoff. NotFound for an unknown task,
// FailedPrecondition for a finished one (the broadcaster decides).
func (s *Server) RetryBroadcast(ctx context.Context, req *coordpb.RetryBroadcastRequest) (*coordpb.RetryBroadcastResponse, error) {
	if req.BroadcastId == 0 {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: broadcast_id must be positive", errInvalid))
	}
	return operateOnBroadcast(s, ctx, req, coordpb.BroadcasterClient.RetryBroadcast, &coordpb.RetryBroadcastResponse{},
		func(b Broadcasts) error { return b.Retry(req.BroadcastId) })
}

// AbandonBroadcast tombstones a pending task without its callback, keeping
// the reason, and releases its resource keys (docs/semantics.md#broadcast-lifecycle).
// NotFound for an unknown task, FailedPrecondition for a finished one.
func (s *Server) AbandonBroadcast(ctx context.Context, req *coordpb.AbandonBroadcastRequest) (*coordpb.AbandonBroadcastResponse, error) {
	if _, err := commands.New(&logpb.AbandonBroadcast{BroadcastId: req.BroadcastId, Reason: req.Reason}, ""); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return operateOnBroadcast(s, ctx, req, coordpb.BroadcasterClient.AbandonBroadcast, &coordpb.AbandonBroadcastResponse{},
		func(b Broadcasts) error { return b.Abandon(ctx, req.BroadcastId, req.Reason) })
}

// operateOnBroadcast serves an operator's action on one task (Retry,
// Abandon) once its request was checked: forwarded to the leader, then
// act on the leader's broadcaster, which answers for an unknown or
// finished task.
func operateOnBroadcast[Req, Resp any](s *Server, ctx context.Context, req Req,
	remote func(coordpb.BroadcasterClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
	done Resp, act func(Broadcasts) error) (Resp, error) {
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
