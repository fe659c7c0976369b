package streamingnode

import (
	"context"
	"sync"

	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// MaxAppendBatchItems bounds the items of one AppendBatch. coordd sends
// one batch per node and broadcast step (controller/broadcaster, split
// when larger), far below it; a bigger batch is refused whole.
const MaxAppendBatchItems = 1024

// AppendBatch is several coordinator Appends in one call: the broadcaster
// sends one per node and broadcast step instead of one Append per target
// (docs/architecture.md#batched-broadcast-appends).
//
// Invariants:
//   - the call is coordd's: on a secure node it needs coordd's server
//     identity (requireCoordinator) before any item is looked at, and each
//     item must carry coord_term (a data-path writer uses Append);
//   - each item is checked and written by appendOne, the body of Append,
//     so identity, the coordinator-term fence, the PChannel term,
//     ownership, RO mode, the DML refusal, dedup by (broadcast ID,
//     VChannel) and the ack_sync_up ack are exactly those of a single
//     Append;
//   - results[i] answers items[i]; an item's refusal is its result, never
//     the call's, so one fenced or moved channel does not fail the others;
//   - the items run concurrently: items on one PChannel enqueue into its
//     WAL together and share a group commit's fdatasync, items on
//     different PChannels take different slot locks and never wait for
//     each other.
func (s *service) AppendBatch(ctx context.Context, req *coordpb.AppendBatchRequest) (*coordpb.AppendBatchResponse, error) {
	n := s.n
	if err := n.requireCoordinator(ctx, "AppendBatch"); err != nil {
		return nil, err
	}
	if len(req.Items) == 0 || len(req.Items) > MaxAppendBatchItems {
		return nil, invalid("AppendBatch carries %d items, want 1..%d", len(req.Items), MaxAppendBatchItems)
	}
	results := make([]*coordpb.AppendBatchResult, len(req.Items))
	var wg sync.WaitGroup
	for i, item := range req.Items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = batchResult(n.appendBatchItem(ctx, item))
		}()
	}
	wg.Wait()
	return &coordpb.AppendBatchResponse{Results: results}, nil
}

// appendBatchItem appends one item of an AppendBatch.
func (n *Node) appendBatchItem(ctx context.Context, item *coordpb.AppendRequest) (*coordpb.AppendResponse, error) {
	if item == nil {
		return nil, invalid("empty AppendBatch item")
	}
	if item.CoordTerm == 0 {
		return nil, invalid("an AppendBatch item must carry coord_term: the batch is the coordinator's broadcast append, other writers use Append")
	}
	return n.appendOne(ctx, item)
}

// batchResult is an item's outcome as AppendBatchResult: the response,
// or the status the same Append would have failed with.
func batchResult(resp *coordpb.AppendResponse, err error) *coordpb.AppendBatchResult {
	if err != nil {
		st := status.Convert(err) // Unknown for an error without a status
		return &coordpb.AppendBatchResult{Code: uint32(st.Code()), Message: st.Message()}
	}
	return &coordpb.AppendBatchResult{Response: resp}
}
