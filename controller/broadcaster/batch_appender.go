package broadcaster

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/conncache"
)

// AppendItem is one target of a batched append: a VChannel and the term of
// its PChannel the owner must hold.
type AppendItem struct {
	VChannel     string
	PChannelTerm int64
}

// AppendResult is the outcome of one AppendItem: its checkpoint, or the
// error a single Append of it would have returned.
type AppendResult struct {
	Checkpoint *logpb.VChannelCheckpoint
	Err        error
}

// BatchAppender is an Appender that also appends one broadcast message to
// several targets on one node in one call (StreamingNodeService.AppendBatch,
// docs/architecture.md#batched-broadcast-appends). The broadcaster uses it
// when its Appender has it: one call per node and step instead of one per
// target.
type BatchAppender interface {
	Appender
	// AppendBatch appends the message to every item on node, fenced by
	// coordTerm, and returns results[i] for items[i]: each item succeeds
	// or fails on its own, as if appended by Append.
	AppendBatch(ctx context.Context, node NodeTarget, items []AppendItem, payload []byte,
		broadcastID uint64, ackSyncUp bool, coordTerm uint64) []AppendResult
}

// fallbackParallelism bounds the per-item Appends to one node that does
// not serve AppendBatch.
const fallbackParallelism = 16

// noBatchNodes remembers the node registrations that answered AppendBatch
// with Unimplemented (an older streaming node), by address, so their next
// batches go straight to per-item Appends. A new registration at the
// address (a restart, possibly upgraded) is asked again.
type noBatchNodes struct {
	mu    sync.Mutex
	nodes map[string]NodeTarget
}

func (n *noBatchNodes) has(node NodeTarget) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	old, ok := n.nodes[node.Addr]
	return ok && old == node
}

func (n *noBatchNodes) add(node NodeTarget) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nodes == nil {
		n.nodes = map[string]NodeTarget{}
	}
	n.nodes[node.Addr] = node
}

// AppendBatch implements BatchAppender: one AppendBatch RPC carrying an
// AppendRequest per item (each with coordTerm, the node's registration and
// the item's PChannel term, so the node checks each exactly like an
// Append). The node's certificate is checked once for the call
// (conncache.CheckNode); a call-level failure fails every item. A node
// that answers Unimplemented (mixed versions during an upgrade) gets the
// items as single Appends instead, now and for the rest of its
// registration.
func (a *GRPCAppender) AppendBatch(ctx context.Context, node NodeTarget, items []AppendItem, payload []byte,
	broadcastID uint64, ackSyncUp bool, coordTerm uint64) []AppendResult {
	if a.noBatch.has(node) {
		return a.appendEach(ctx, node, items, payload, broadcastID, ackSyncUp, coordTerm)
	}
	cl, err := a.client(node.Addr)
	if err != nil {
		return failAll(len(items), err)
	}
	req := &coordpb.AppendBatchRequest{Items: make([]*coordpb.AppendRequest, len(items))}
	for i, it := range items {
		req.Items[i] = &coordpb.AppendRequest{Vchannel: it.VChannel, Term: it.PChannelTerm, Payload: payload,
			BroadcastId: broadcastID, AckSyncUp: ackSyncUp, CoordTerm: coordTerm, NodeId: node.ID, Epoch: node.Epoch}
	}
	var p peer.Peer
	resp, err := cl.AppendBatch(ctx, req, grpc.Peer(&p))
	if status.Code(err) == codes.Unimplemented {
		a.noBatch.add(node)
		return a.appendEach(ctx, node, items, payload, broadcastID, ackSyncUp, coordTerm)
	}
	if err != nil {
		return failAll(len(items), err)
	}
	if err := conncache.CheckNode(&p, node.Bound); err != nil {
		// Not the owner's WAL: every target stays unacked.
		return failAll(len(items), status.Errorf(codes.PermissionDenied, "append batch to %s: %v", node.Addr, err))
	}
	if len(resp.Results) != len(items) {
		return failAll(len(items), status.Errorf(codes.Internal, "append batch to %s: %d results for %d items",
			node.Addr, len(resp.Results), len(items)))
	}
	out := make([]AppendResult, len(items))
	for i, r := range resp.Results {
		if r.Code != uint32(codes.OK) {
			out[i].Err = status.Error(codes.Code(r.Code), r.Message)
			continue
		}
		out[i].Checkpoint, out[i].Err = checkpointOf(items[i].VChannel, node.Addr, r.Response)
	}
	return out
}

// appendEach appends the items one Append each (concurrently, bounded):
// the fallback for a node without AppendBatch.
func (a *GRPCAppender) appendEach(ctx context.Context, node NodeTarget, items []AppendItem, payload []byte,
	broadcastID uint64, ackSyncUp bool, coordTerm uint64) []AppendResult {
	out := make([]AppendResult, len(items))
	runBounded(len(items), fallbackParallelism, func(i int) {
		it := items[i]
		out[i].Checkpoint, out[i].Err = a.Append(ctx, node, it.VChannel, it.PChannelTerm, payload, broadcastID, ackSyncUp, coordTerm)
	})
	return out
}

// failAll is n results failed with err.
func failAll(n int, err error) []AppendResult {
	out := make([]AppendResult, n)
	for i := range out {
		out[i].Err = err
	}
	return out
}
