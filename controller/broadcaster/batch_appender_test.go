package broadcaster

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// batchNodeService is a streaming node that serves AppendBatch: an item
// whose VChannel contains "moved" is refused (FailedPrecondition), every
// other one appended at term 3, offset = its index.
type batchNodeService struct {
	fakeNodeService
	batches []*coordpb.AppendBatchRequest
}

func (s *batchNodeService) AppendBatch(_ context.Context, req *coordpb.AppendBatchRequest) (*coordpb.AppendBatchResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, req)
	resp := &coordpb.AppendBatchResponse{}
	for i, it := range req.Items {
		r := &coordpb.AppendBatchResult{Response: &coordpb.AppendResponse{Id: &coordpb.MessageID{Term: 3, Offset: uint64(i)}, Timestamp: 4242}}
		if strings.Contains(it.Vchannel, "moved") {
			r = &coordpb.AppendBatchResult{Code: uint32(codes.FailedPrecondition), Message: "not the owner"}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// serveNode serves svc on loopback and counts the calls per method.
func serveNode(t *testing.T, svc coordpb.StreamingNodeServiceServer) (addr string, calls func(method string) int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := map[string]int{}
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		n[info.FullMethod]++
		mu.Unlock()
		return h(ctx, req)
	}))
	coordpb.RegisterStreamingNodeServiceServer(g, svc)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String(), func(m string) int {
		mu.Lock()
		defer mu.Unlock()
		return n["/"+coordpb.StreamingNodeService_ServiceDesc.ServiceName+"/"+m]
	}
}

// TestGRPCAppenderBatch: one AppendBatch carries every item with the
// broadcast's fields, the node's registration and the coordinator term;
// each item's result maps to its own checkpoint or to an error with the
// node's code (so an ownership refusal stays an ownership error).
func TestGRPCAppenderBatch(t *testing.T) {
	svc := &batchNodeService{}
	addr, calls := serveNode(t, svc)
	a := NewGRPCAppender(nil)
	defer a.Close()
	var _ BatchAppender = a
	node := NodeTarget{Addr: addr, ID: 4, Epoch: 77}
	res := a.AppendBatch(context.Background(), node, []AppendItem{{"p_0_5v0", 3}, {"p_1_moved_5v0", 2}, {"p_2_5v0", 3}},
		[]byte("x"), 17, true, 9)
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	for _, i := range []int{0, 2} {
		cp := res[i].Checkpoint
		if res[i].Err != nil || cp.Vchannel != []string{"p_0_5v0", "", "p_2_5v0"}[i] || cp.Term != 3 || cp.Offset != uint64(i) || cp.TimeTick != 4242 {
			t.Fatalf("result %d: %v %v", i, cp, res[i].Err)
		}
	}
	if err := res[1].Err; res[1].Checkpoint != nil || status.Code(err) != codes.FailedPrecondition || !ownershipError(err) {
		t.Fatalf("refused item: %v %v, want a FailedPrecondition ownership error", res[1].Checkpoint, err)
	}
	if calls("AppendBatch") != 1 || calls("Append") != 0 {
		t.Fatalf("%d AppendBatch and %d Append calls, want one batch", calls("AppendBatch"), calls("Append"))
	}
	req := svc.batches[0]
	for i, it := range req.Items {
		if it.Vchannel != []string{"p_0_5v0", "p_1_moved_5v0", "p_2_5v0"}[i] || it.Term != []int64{3, 2, 3}[i] || string(it.Payload) != "x" ||
			it.BroadcastId != 17 || !it.AckSyncUp || it.CoordTerm != 9 || it.NodeId != 4 || it.Epoch != 77 {
			t.Fatalf("item %d: %v", i, it)
		}
	}
}

// TestGRPCAppenderBatchFallsBackToAppend: a node without AppendBatch (an
// older version: Unimplemented) gets the items as single Appends, and the
// next batch for the same registration goes straight to them; a new
// registration at the address is asked for AppendBatch again. Refusals
// keep their codes.
func TestGRPCAppenderBatchFallsBackToAppend(t *testing.T) {
	svc := &fakeNodeService{}
	addr, calls := serveNode(t, svc)
	a := NewGRPCAppender(nil)
	defer a.Close()
	node := NodeTarget{Addr: addr, ID: 4, Epoch: 77}
	items := []AppendItem{{"p_0_5v0", 3}, {"p_1_5v0", 3}}
	for round := 1; round <= 2; round++ {
		res := a.AppendBatch(context.Background(), node, items, []byte("x"), 17, false, 9)
		for i, r := range res {
			if r.Err != nil || r.Checkpoint.Vchannel != items[i].VChannel || r.Checkpoint.Offset != 41 {
				t.Fatalf("round %d item %d: %v %v", round, i, r.Checkpoint, r.Err)
			}
		}
		if calls("AppendBatch") != 1 || calls("Append") != 2*round {
			t.Fatalf("round %d: %d AppendBatch and %d Append calls", round, calls("AppendBatch"), calls("Append"))
		}
	}
	svc.mu.Lock()
	for _, req := range svc.reqs {
		if req.CoordTerm != 9 || req.NodeId != 4 || req.Epoch != 77 || req.BroadcastId != 17 {
			t.Fatalf("fallback append %v", req)
		}
	}
	svc.fail = status.Error(codes.FailedPrecondition, "wrong term")
	svc.mu.Unlock()
	restarted := NodeTarget{Addr: addr, ID: 4, Epoch: 78}
	res := a.AppendBatch(context.Background(), restarted, items[:1], []byte("x"), 17, false, 9)
	if status.Code(res[0].Err) != codes.FailedPrecondition || calls("AppendBatch") != 2 {
		t.Fatalf("new registration: %v after %d AppendBatch calls", res[0].Err, calls("AppendBatch"))
	}
}
