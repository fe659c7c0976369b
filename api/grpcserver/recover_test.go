package grpcserver

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/routines"
)

// panickingBroadcasts is a broadcaster whose Ack has a bug.
type panickingBroadcasts struct{ fakeBroadcasts }

func (*panickingBroadcasts) Ack(context.Context, broadcaster.Ack) error { panic("ack bug") }

// TestHandlerPanicIsRecovered: a panicking handler answers Internal with
// an outcome-unknown trailer, is counted, and the server keeps serving.
func TestHandlerPanicIsRecovered(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	tn := startTestNodeCfg(t, routines.Config{Doubles: routines.Doubles{Broadcasts: &panickingBroadcasts{}}}, WithPanicObserver(func(surface, method string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, surface+" "+method)
	}))
	bc := coordpb.NewBroadcasterClient(tn.conn)
	var trailer metadata.MD
	_, err := bc.Ack(callCtx(t), &coordpb.AckRequest{BroadcastId: 1, NodeId: 1, Epoch: 1,
		Checkpoints: []*coordpb.Checkpoint{{Vchannel: bcCChan, Term: 1, TimeTick: 1}}}, grpc.Trailer(&trailer))
	checkStatus(t, "Ack", err, codes.Internal, "internal error in /coordd.v1.Broadcaster/Ack")
	if got := trailer.Get(MDOutcome); len(got) != 1 || got[0] != "unknown" {
		t.Errorf("trailer %s = %v, want [unknown]", MDOutcome, got)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0] != "grpc /coordd.v1.Broadcaster/Ack" {
		t.Errorf("observer saw %v, want one grpc panic in Ack", seen)
	}
	mu.Unlock()
	if _, err := tn.alloc.AllocID(callCtx(t), &coordpb.AllocIDRequest{Count: 1}); err != nil {
		t.Fatalf("the server stopped serving after a recovered panic: %v", err)
	}
}
