package raftnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

// routineStart is one start of a leader routine, with the context and
// the proposer it was given.
type routineStart struct {
	node int
	term uint64
	ctx  context.Context
	p    commands.Proposer
}

// TestDeposedRoutineDecisionIsRefused: a leader routine's proposals carry
// the term the routine was started in, and Apply refuses them once a newer
// leader has established itself, even when the routine's node leads again
// in a later term by the time the proposal reaches the log.
func TestDeposedRoutineDecisionIsRefused(t *testing.T) {
	starts := make(chan routineStart, 16)
	c := newCluster(t, 3, withSetup(func(i int, n *raftnode.Node) {
		n.AddLeaderRoutine("decider", func(ctx context.Context, term uint64, p commands.Proposer) {
			starts <- routineStart{node: i, term: term, ctx: ctx, p: p}
			<-ctx.Done()
		})
	}))
	next := func(what string) routineStart {
		t.Helper()
		select {
		case s := <-starts:
			return s
		case <-time.After(electTimeout):
			t.Fatalf("timed out waiting for a routine to start %s", what)
			return routineStart{}
		}
	}

	old := next("on the first leader")
	a := c.node(old.node)
	if err := transferLeadership(a, nil); err != nil {
		t.Fatalf("transfer leadership away from n%d: %v", old.node, err)
	}
	mid := next("on the second leader")
	if mid.node == old.node || mid.term <= old.term {
		t.Fatalf("second routine on n%d in term %d; want another node after term %d", mid.node, mid.term, old.term)
	}
	if err := transferLeadership(c.node(mid.node), a); err != nil {
		t.Fatalf("transfer leadership back to n%d: %v", old.node, err)
	}
	again := next("on the first leader again")
	if again.node != old.node || again.term <= mid.term {
		t.Fatalf("third routine on n%d in term %d; want n%d after term %d", again.node, again.term, old.node, mid.term)
	}
	if old.ctx.Err() == nil {
		t.Fatal("the deposed routine's context is still live")
	}

	// A routine that missed its cancellation (modelled by dropping it from
	// its context) decides with the term it was started in. Its node leads
	// again, so the proposal is accepted into the log; Apply must refuse it.
	before := linearizableRead(t, a)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(old.ctx), opTimeout)
	defer cancel()
	res, err := commands.Propose(ctx, old.p, &logpb.ReserveIDs{Count: 5}, "")
	if err != nil {
		t.Fatalf("propose from the deposed routine: %v", err)
	}
	if res.Rejection == nil || res.Rejection.Code != logpb.RejectCode_REJECT_STALE {
		t.Fatalf("decision of term %d applied after leaders of terms %d and %d: result %v; want REJECT_STALE",
			old.term, mid.term, again.term, res)
	}
	// The same with the term set on the command explicitly.
	cmd, err := commands.New(&logpb.ReserveIDs{Count: 5}, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err = a.Propose(ctx, cmd.DecidedIn(old.term))
	if err != nil || res.Rejection == nil || res.Rejection.Code != logpb.RejectCode_REJECT_STALE {
		t.Fatalf("explicit term-%d decision: %v, %v; want REJECT_STALE", old.term, res, err)
	}
	if after := linearizableRead(t, a); after.NextID() != before.NextID() {
		t.Fatalf("refused decisions changed the state: NextID %d -> %d", before.NextID(), after.NextID())
	}

	// The current routine's decisions go through.
	cctx, ccancel := context.WithTimeout(again.ctx, opTimeout)
	defer ccancel()
	if res, err := commands.Propose(cctx, again.p, &logpb.ReserveIDs{Count: 5}, ""); err != nil || res.Rejection != nil {
		t.Fatalf("propose from the current routine (term %d): %v, %v", again.term, res, err)
	}
}
