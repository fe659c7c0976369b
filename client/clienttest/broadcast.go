package clienttest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// BroadcastScript is one scripted answer of Broadcast (see ScriptBroadcast).
type BroadcastScript struct {
	// Apply handles the request as an unscripted call would (the task is
	// created, or found by its idempotency key) before answering.
	Apply bool
	// OutcomeUnknown answers Unavailable with "coordd-outcome: unknown".
	OutcomeUnknown bool
	// Err, if set, is the answer.
	Err error
	// Resp, if set, is the answer when there is no error; otherwise the
	// answer is what Apply produced (or an empty response).
	Resp *coordpb.BroadcastResponse
	// Hang answers nothing until the call's context ends (a lock wait
	// that outlives the caller's deadline); the caller sees its own
	// context's error.
	Hang bool
}

// broadcasts is the fake broadcaster's state, guarded by Cluster.mu.
type broadcasts struct {
	tasks      map[uint64]*coordpb.BroadcastInfo
	idem       map[string]uint64 // message type "\x00" scoped key → task
	byRequest  map[string]uint64 // request ID → the task its first call made
	requests   []*coordpb.BroadcastRequest
	acks       []*coordpb.AckRequest
	retries    []uint64
	script     []BroadcastScript
	nextOffset uint64
}

func newBroadcasts() broadcasts {
	return broadcasts{tasks: map[uint64]*coordpb.BroadcastInfo{}, idem: map[string]uint64{}, byRequest: map[string]uint64{}, nextOffset: 1000}
}

// SampleBroadcasts is a small set of tasks: 7, a completed CreateCollection
// on two VChannels; 8, a pending DropCollection whose callback failed
// twice; 9, an abandoned custom message.
func SampleBroadcasts() []*coordpb.BroadcastInfo {
	cch := "by-dev-rootcoord-dml_0_vcchan"
	v0, v1 := "by-dev-rootcoord-dml_0_42v0", "by-dev-rootcoord-dml_1_42v1"
	return []*coordpb.BroadcastInfo{
		{BroadcastId: 7, MessageType: vocab.MsgCreateCollection, State: "TOMBSTONE",
			ResourceKeys: []*coordpb.ResourceKey{{Domain: "CLUSTER", Shared: true}, {Domain: "COLLECTION_NAME", Key: "db1:c1"}},
			Vchannels:    []string{cch, v0, v1},
			Acked: []*coordpb.Checkpoint{{Vchannel: cch, Term: 4, Offset: 11, TimeTick: 1 << 60}, {Vchannel: v0, Term: 4, Offset: 12, TimeTick: 1<<60 + 1},
				{Vchannel: v1, Term: 2, Offset: 7, TimeTick: 1<<60 + 2}},
			IdempotencyKey: "coll/42/6:create", CreatedUnixMs: 1_700_000_000_000, TombstonedUnixMs: 1_700_000_000_250,
			CallbackAttempts: 1, PayloadBytes: 4},
		{BroadcastId: 8, MessageType: vocab.MsgDropCollection, State: "PENDING",
			ResourceKeys:  []*coordpb.ResourceKey{{Domain: "CLUSTER", Shared: true}, {Domain: "COLLECTION_NAME", Key: "db1:c2"}},
			Vchannels:     []string{cch, "by-dev-rootcoord-dml_1_43v0"},
			Acked:         []*coordpb.Checkpoint{{Vchannel: cch, Term: 4, Offset: 13, TimeTick: 1<<60 + 3}},
			CreatedUnixMs: 1_700_000_001_000, CallbackAttempts: 2, LastError: "collection 43: vchannels are in use", PayloadBytes: 2},
		{BroadcastId: 9, MessageType: "RenameAlias", State: "TOMBSTONE",
			ResourceKeys: []*coordpb.ResourceKey{{Domain: "CLUSTER", Shared: true}}, Vchannels: []string{cch},
			CreatedUnixMs: 1_700_000_002_000, TombstonedUnixMs: 1_700_000_003_000, AbandonedReason: "streaming node gone"},
	}
}

// SetBroadcasts replaces the broadcast tasks (deep copies) and their
// idempotency index; new tasks get IDs above theirs.
func (c *Cluster) SetBroadcasts(tasks ...*coordpb.BroadcastInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bc.tasks, c.bc.idem, c.bc.byRequest = map[uint64]*coordpb.BroadcastInfo{}, map[string]uint64{}, map[string]uint64{}
	for _, t := range tasks {
		c.bc.tasks[t.BroadcastId] = proto.Clone(t).(*coordpb.BroadcastInfo)
		if t.IdempotencyKey != "" {
			c.bc.idem[t.MessageType+"\x00"+t.IdempotencyKey] = t.BroadcastId
		}
		c.nextID = max(c.nextID, t.BroadcastId+1)
	}
}

// Broadcasts returns every broadcast task by ID.
func (c *Cluster) Broadcasts() []*coordpb.BroadcastInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broadcastsLocked(false)
}

func (c *Cluster) broadcastsLocked(pendingOnly bool) []*coordpb.BroadcastInfo {
	out := []*coordpb.BroadcastInfo{}
	for _, t := range c.bc.tasks {
		if !pendingOnly || t.State != "TOMBSTONE" {
			out = append(out, proto.Clone(t).(*coordpb.BroadcastInfo))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BroadcastId < out[j].BroadcastId })
	return out
}

// ScriptBroadcast queues answers for the next Broadcast calls, one per
// call (on any node). A call with no script left is handled normally: see
// Broadcast.
func (c *Cluster) ScriptBroadcast(s ...BroadcastScript) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bc.script = append(c.bc.script, s...)
}

// BroadcastRequests returns every Broadcast request received, in order.
func (c *Cluster) BroadcastRequests() []*coordpb.BroadcastRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*coordpb.BroadcastRequest, len(c.bc.requests))
	for i, r := range c.bc.requests {
		out[i] = proto.Clone(r).(*coordpb.BroadcastRequest)
	}
	return out
}

// Acks returns every Ack request received, in order.
func (c *Cluster) Acks() []*coordpb.AckRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*coordpb.AckRequest, len(c.bc.acks))
	for i, r := range c.bc.acks {
		out[i] = proto.Clone(r).(*coordpb.AckRequest)
	}
	return out
}

// Retries returns the IDs of every accepted RetryBroadcast, in order.
func (c *Cluster) Retries() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.bc.retries)
}

var fakeDomains = map[string]bool{"CLUSTER": true, "DB_NAME": true, "COLLECTION_NAME": true, "PRIVILEGE": true,
	"SNAPSHOT_NAME": true, "IMPORT_JOB_ID": true}

// checkBroadcast is the fake's share of the server's input checks.
func checkBroadcast(req *coordpb.BroadcastRequest) (scopedKey string, err error) {
	if err := vocab.ValidateMessageType(req.MessageType); err != nil {
		return "", status.Error(codes.InvalidArgument, err.Error())
	}
	if len(req.ResourceKeys) > vocab.MaxResourceKeys {
		return "", status.Errorf(codes.InvalidArgument, "%d resource keys (max %d)", len(req.ResourceKeys), vocab.MaxResourceKeys)
	}
	for _, k := range req.ResourceKeys {
		if !fakeDomains[strings.ToUpper(k.Domain)] {
			return "", status.Errorf(codes.InvalidArgument, "unknown resource key domain %q", k.Domain)
		}
	}
	for _, v := range req.Vchannels {
		if err := vocab.ValidateBroadcastTarget(v); err != nil {
			return "", status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if ik := req.IdempotencyKey; ik != nil {
		switch strings.ToUpper(ik.Scope) {
		case "CLUSTER":
			scopedKey, err = vocab.ClusterScopedKey(ik.Key)
		case "DATABASE":
			scopedKey, err = vocab.DatabaseScopedKey(ik.ScopeId, ik.Key)
		case "COLLECTION":
			scopedKey, err = vocab.CollectionScopedKey(ik.ScopeId, ik.Key)
		default:
			err = fmt.Errorf("idempotency scope must be CLUSTER, DATABASE or COLLECTION, got %q", ik.Scope)
		}
		if err != nil {
			return "", status.Error(codes.InvalidArgument, err.Error())
		}
	}
	return scopedKey, nil
}

// Broadcast implements coordpb.BroadcasterServer. It plays the next
// scripted answer, if any. Unscripted, it checks the request like coordd
// and completes it at once: a known idempotency key returns its task
// (duplicated); otherwise a TOMBSTONE task is recorded, acked on every
// target (the CChannel added; no targets: a CreateCollection's VChannels,
// allocated first, or every PChannel with the CChannel for its own), with
// made-up checkpoints.
func (n *Node) Broadcast(ctx context.Context, req *coordpb.BroadcastRequest) (*coordpb.BroadcastResponse, error) {
	c := n.c
	c.mu.Lock()
	c.bc.requests = append(c.bc.requests, proto.Clone(req).(*coordpb.BroadcastRequest))
	var script *BroadcastScript
	if len(c.bc.script) > 0 {
		script = &c.bc.script[0]
		c.bc.script = c.bc.script[1:]
	}
	c.mu.Unlock()
	if script == nil {
		return n.applyBroadcast(ctx, req)
	}
	resp := &coordpb.BroadcastResponse{}
	if script.Apply {
		r, err := n.applyBroadcast(ctx, req)
		if err != nil {
			return nil, err
		}
		resp = r
	}
	switch {
	case script.Hang:
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	case script.OutcomeUnknown:
		return nil, OutcomeUnknown(ctx)
	case script.Err != nil:
		return nil, script.Err
	case script.Resp != nil:
		return proto.Clone(script.Resp).(*coordpb.BroadcastResponse), nil
	}
	return resp, nil
}

func (n *Node) applyBroadcast(ctx context.Context, req *coordpb.BroadcastRequest) (*coordpb.BroadcastResponse, error) {
	scoped, err := checkBroadcast(req)
	if err != nil {
		return nil, err
	}
	c := n.c
	c.mu.Lock()
	var id uint64
	var ok bool
	if scoped != "" {
		id, ok = c.bc.idem[req.MessageType+"\x00"+scoped]
	}
	if !ok && req.RequestId != "" {
		// A repeat of a request ID is answered with its first task, as
		// coordd's request-ID dedup does.
		id, ok = c.bc.byRequest[req.RequestId]
	}
	c.mu.Unlock()
	if ok {
		return c.broadcastResponse(id, true), nil
	}
	targets := slices.Clone(req.Vchannels)
	if len(targets) == 0 && req.MessageType == vocab.MsgCreateCollection {
		var p coordpb.CreateCollectionPayload
		if err := proto.Unmarshal(req.Payload, &p); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "CreateCollection payload: %v", err)
		}
		resp, err := n.AllocVirtualChannels(ctx, &coordpb.AllocVirtualChannelsRequest{CollectionId: p.CollectionId, Count: p.Shards})
		if err != nil {
			return nil, err
		}
		targets = resp.Vchannels
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cch := c.ch.state.CChannel
	if len(targets) == 0 {
		for _, p := range c.ch.state.PChannels {
			if p.Name != vocab.PChannelOf(cch) {
				targets = append(targets, p.Name)
			}
		}
	}
	if cch != "" && !slices.Contains(targets, cch) {
		targets = append(targets, cch)
	}
	if len(targets) == 0 {
		return nil, status.Error(codes.FailedPrecondition, "streaming is not initialized: there is no control channel yet")
	}
	sort.Strings(targets)
	now := time.Now().UnixMilli()
	t := &coordpb.BroadcastInfo{BroadcastId: c.nextID, MessageType: req.MessageType, State: "TOMBSTONE",
		Vchannels: targets, AckSyncUp: req.AckSyncUp, IdempotencyKey: scoped, CreatedUnixMs: now, TombstonedUnixMs: now,
		PayloadBytes: uint32(len(req.Payload))}
	c.nextID++
	hasCluster := false
	for _, k := range req.ResourceKeys {
		k = &coordpb.ResourceKey{Domain: strings.ToUpper(k.Domain), Key: k.Key, Shared: k.Shared}
		hasCluster = hasCluster || k.Domain == "CLUSTER"
		t.ResourceKeys = append(t.ResourceKeys, k)
	}
	if !hasCluster {
		t.ResourceKeys = append([]*coordpb.ResourceKey{{Domain: "CLUSTER", Shared: true}}, t.ResourceKeys...)
	}
	if callbackTypes[req.MessageType] {
		t.CallbackAttempts = 1
	}
	for _, v := range targets {
		term := int64(1)
		for _, p := range c.ch.state.PChannels {
			if p.Name == vocab.PChannelOf(v) && p.Term > 0 {
				term = p.Term
			}
		}
		t.Acked = append(t.Acked, &coordpb.Checkpoint{Vchannel: v, Term: term, Offset: c.bc.nextOffset, TimeTick: c.nextTS})
		c.bc.nextOffset++
		c.nextTS++
	}
	c.bc.tasks[t.BroadcastId] = t
	if scoped != "" {
		c.bc.idem[req.MessageType+"\x00"+scoped] = t.BroadcastId
	}
	if req.RequestId != "" {
		c.bc.byRequest[req.RequestId] = t.BroadcastId
	}
	return c.broadcastResponseLocked(t.BroadcastId, false), nil
}

// callbackTypes are the message types whose callbacks coordd runs.
var callbackTypes = map[string]bool{vocab.MsgCreateCollection: true, vocab.MsgDropCollection: true,
	vocab.MsgAlterReplicateConfig: true, vocab.MsgFlushAll: true}

func (c *Cluster) broadcastResponse(id uint64, duplicated bool) *coordpb.BroadcastResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broadcastResponseLocked(id, duplicated)
}

func (c *Cluster) broadcastResponseLocked(id uint64, duplicated bool) *coordpb.BroadcastResponse {
	out := &coordpb.BroadcastResponse{BroadcastId: id, Duplicated: duplicated}
	if t, ok := c.bc.tasks[id]; ok {
		for _, cp := range t.Acked {
			out.AppendResults = append(out.AppendResults, proto.Clone(cp).(*coordpb.Checkpoint))
		}
	}
	return out
}

// Ack implements coordpb.BroadcasterServer: it is recorded, and adds the
// checkpoints of a pending task's targets not acked yet.
func (n *Node) Ack(_ context.Context, req *coordpb.AckRequest) (*coordpb.AckResponse, error) {
	if req.BroadcastId == 0 || len(req.Checkpoints) == 0 {
		return nil, status.Error(codes.InvalidArgument, "ack needs a broadcast id and at least one checkpoint")
	}
	if req.NodeId == 0 || req.Epoch == 0 {
		return nil, status.Error(codes.InvalidArgument, "node_id and epoch are required: an ack comes from the streaming node that owns the channel")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bc.acks = append(c.bc.acks, proto.Clone(req).(*coordpb.AckRequest))
	t, ok := c.bc.tasks[req.BroadcastId]
	if !ok || t.State == "TOMBSTONE" {
		return &coordpb.AckResponse{}, nil
	}
	for _, cp := range req.Checkpoints {
		if slices.Contains(t.Vchannels, cp.Vchannel) && !slices.ContainsFunc(t.Acked, func(a *coordpb.Checkpoint) bool { return a.Vchannel == cp.Vchannel }) {
			t.Acked = append(t.Acked, proto.Clone(cp).(*coordpb.Checkpoint))
		}
	}
	sort.Slice(t.Acked, func(i, j int) bool { return t.Acked[i].Vchannel < t.Acked[j].Vchannel })
	return &coordpb.AckResponse{}, nil
}

// GetBroadcast implements coordpb.BroadcasterServer.
func (n *Node) GetBroadcast(_ context.Context, req *coordpb.GetBroadcastRequest) (*coordpb.BroadcastInfo, error) {
	if req.BroadcastId == 0 {
		return nil, status.Error(codes.InvalidArgument, "broadcast_id must be positive")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.bc.tasks[req.BroadcastId]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "broadcast %d is unknown (never created, or its tombstone was pruned)", req.BroadcastId)
	}
	return proto.Clone(t).(*coordpb.BroadcastInfo), nil
}

// ListBroadcasts implements coordpb.BroadcasterServer: the newest limit
// tasks (default 1000) by ID.
func (n *Node) ListBroadcasts(_ context.Context, req *coordpb.ListBroadcastsRequest) (*coordpb.ListBroadcastsResponse, error) {
	if req.Limit > 10000 {
		return nil, status.Error(codes.InvalidArgument, "limit must be at most 10000")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	tasks := c.broadcastsLocked(req.PendingOnly)
	limit := int(req.Limit)
	if limit == 0 {
		limit = 1000
	}
	if len(tasks) > limit {
		tasks = tasks[len(tasks)-limit:]
	}
	return &coordpb.ListBroadcastsResponse{Broadcasts: tasks}, nil
}

// pendingLocked finds a pending task or says why not, as coordd does.
func (c *Cluster) pendingLocked(id uint64) (*coordpb.BroadcastInfo, error) {
	t, ok := c.bc.tasks[id]
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "broadcast %d is unknown", id)
	case t.State == "TOMBSTONE":
		return nil, status.Errorf(codes.FailedPrecondition, "broadcast %d is already finished", id)
	}
	return t, nil
}

// RetryBroadcast implements coordpb.BroadcasterServer: a pending task's
// retry is recorded (see Retries).
func (n *Node) RetryBroadcast(_ context.Context, req *coordpb.RetryBroadcastRequest) (*coordpb.RetryBroadcastResponse, error) {
	if req.BroadcastId == 0 {
		return nil, status.Error(codes.InvalidArgument, "broadcast_id must be positive")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.pendingLocked(req.BroadcastId); err != nil {
		return nil, err
	}
	c.bc.retries = append(c.bc.retries, req.BroadcastId)
	return &coordpb.RetryBroadcastResponse{}, nil
}

// AbandonBroadcast implements coordpb.BroadcasterServer: a pending task
// becomes a TOMBSTONE with the reason.
func (n *Node) AbandonBroadcast(_ context.Context, req *coordpb.AbandonBroadcastRequest) (*coordpb.AbandonBroadcastResponse, error) {
	if req.BroadcastId == 0 {
		return nil, status.Error(codes.InvalidArgument, "broadcast id must be positive")
	}
	if req.Reason == "" {
		return nil, status.Error(codes.InvalidArgument, "abandoning a broadcast needs a reason")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.pendingLocked(req.BroadcastId)
	if err != nil {
		return nil, err
	}
	t.State, t.AbandonedReason, t.TombstonedUnixMs = "TOMBSTONE", req.Reason, time.Now().UnixMilli()
	return &coordpb.AbandonBroadcastResponse{}, nil
}
