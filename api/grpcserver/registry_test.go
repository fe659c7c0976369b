package grpcserver

import (
	"fmt"
	"sync"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// proposeAll commits bodies concurrently (so the batcher groups them) and
// returns their results in order.
func proposeAll(t *testing.T, tn *testNode, bodies []*logpb.RegisterStreamingNode) []*logpb.Result {
	t.Helper()
	results := make([]*logpb.Result, len(bodies))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, b := range bodies {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := commands.Propose(callCtx(t), tn.node, b, "")
			if err != nil || res.Rejection != nil {
				t.Errorf("propose %v: %v, %v", b, res, err)
				return
			}
			results[i] = res
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return results
}

// TestDeregisterOfEvictedNodeAnswersDown: once MaxDownNodes DOWN records
// are kept, deregistering the oldest live node evicts its own record in the
// same command. The handler must answer DOWN, not crash the leader.
func TestDeregisterOfEvictedNodeAnswersDown(t *testing.T) {
	tn := startTestNode(t)
	first := mustCommit(t, tn, &logpb.RegisterStreamingNode{Address: "127.0.0.1:10000", Incarnation: "first"}).GetRegisterNode()
	bodies := make([]*logpb.RegisterStreamingNode, fsm.MaxDownNodes)
	for i := range bodies {
		bodies[i] = &logpb.RegisterStreamingNode{Address: fmt.Sprintf("127.0.0.%d:%d", 2+i/1000, 10001+i%1000), Incarnation: "x"}
	}
	var wg sync.WaitGroup
	for _, res := range proposeAll(t, tn, bodies) {
		r := res.GetRegisterNode()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := commands.Propose(callCtx(t), tn.node, &logpb.MarkStreamingNodeDown{NodeId: r.NodeId, Epoch: r.Epoch, Reason: "gone"}, ""); err != nil {
				t.Errorf("mark %d down: %v", r.NodeId, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	reg := coordpb.NewStreamingNodeRegistryClient(tn.conn)
	resp, err := reg.Deregister(callCtx(t), &coordpb.NodeSessionRequest{NodeId: first.NodeId, Epoch: first.Epoch})
	if err != nil || resp.State != "DOWN" {
		t.Fatalf("Deregister of the oldest node = %v, %v; want DOWN", resp, err)
	}
	if _, ok := tn.node.State().StreamingNode(first.NodeId); ok {
		t.Fatalf("node %d is still recorded; the test did not reach the eviction", first.NodeId)
	}
	// The leader still serves.
	if _, err := tn.alloc.AllocID(callCtx(t), &coordpb.AllocIDRequest{Count: 1}); err != nil {
		t.Fatalf("the leader stopped serving: %v", err)
	}
}
