package grpcserver

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/coordd/coordd/api/apitest"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
)

// TestStateBudgetAnswer: over the memory guard's budget, a new collection
// is answered ResourceExhausted naming the budget, the state's size and
// what frees it, without a retry-after mark (asking again gets the same
// answer) and with nothing done; a drop still reaches the state machine
// (docs/operations.md#memory-guard).
func TestStateBudgetAnswer(t *testing.T) {
	tn := startTestNodeKit(t, apitest.Config{SkipRegister: true, StateBudget: 1}, nil)
	mustCommit(t, tn, &logpb.InitStreaming{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1, bcP2}})
	ch := coordpb.NewChannelsClient(tn.conn)
	var trailer metadata.MD
	_, err := ch.AllocVirtualChannels(callCtx(t), &coordpb.AllocVirtualChannelsRequest{CollectionId: 7, Count: 2}, grpc.Trailer(&trailer))
	checkStatus(t, "AllocVirtualChannels over the budget", err, codes.ResourceExhausted, "at or over its budget of 1 B (--state-budget)")
	checkStatus(t, "AllocVirtualChannels over the budget", err, codes.ResourceExhausted, "drop collections")
	if v := trailer.Get(MDRetryAfter); len(v) != 0 {
		t.Errorf("refusal carries %s %v; the guard's answer is not worth retrying as is", MDRetryAfter, v)
	}
	if _, ok := tn.node.State().Collection(7); ok {
		t.Error("refused collection 7 exists")
	}
	// A drop passes the guard: Apply answers it (the collection does not exist).
	_, err = ch.DropVirtualChannels(callCtx(t), &coordpb.DropVirtualChannelsRequest{CollectionId: 7})
	checkStatus(t, "DropVirtualChannels over the budget", err, codes.NotFound, "collection 7")
}
