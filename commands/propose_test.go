package commands

import (
	"context"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// TestPrepareReadsScopeAndOptions: Prepare, the one reader every Proposer
// shares, stamps the scope's decision term and caller node into a command
// that has none, keeps a command's own, and carries the options and the
// routine mark.
func TestPrepareReadsScopeAndOptions(t *testing.T) {
	c, err := New(&logpb.ReserveIDs{Count: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	plain := Prepare(context.Background(), c)
	if plain.Command.LeaderTerm != 0 || plain.Command.CallerNode != 0 || plain.Chained || plain.Routine {
		t.Fatalf("a plain proposal reads as %+v", plain)
	}
	plain.Queued() // no function: nothing to call

	ctx := WithCallerNode(WithLeaderRoutine(context.Background(), 7), 42)
	calls := 0
	p := Prepare(ctx, c, OnQueued(func() { calls++ }), Chained())
	if p.Command.LeaderTerm != 7 || p.Command.CallerNode != 42 || !p.Chained || !p.Routine {
		t.Fatalf("a routine's chained proposal reads as %+v", p)
	}
	p.Queued()
	p.Queued()
	if calls != 1 {
		t.Fatalf("OnQueued's function ran %d times, want once", calls)
	}

	own := c.DecidedIn(9)
	own.CallerNode = 5
	if p := Prepare(ctx, own); p.Command.LeaderTerm != 9 || p.Command.CallerNode != 5 {
		t.Fatalf("a command's own term and caller were replaced: %+v", p.Command)
	}
	if p := Prepare(WithLeaderRoutine(context.Background(), 0), c); !p.Routine || p.Command.LeaderTerm != 0 {
		t.Fatalf("a routine without a term reads as %+v", p)
	}
	if p := Prepare(WithDecisionTerm(context.Background(), 3), c); p.Routine || p.Command.LeaderTerm != 3 {
		t.Fatalf("a decision term alone reads as %+v", p)
	}
}
