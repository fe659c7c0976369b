package commands

import (
	"context"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// TestPrepareReadsOptions: Prepare, the one reader every Proposer shares,
// stamps the options' decision term and caller node into a command that
// has none, keeps a command's own, and carries the other options.
func TestPrepareReadsOptions(t *testing.T) {
	c, err := New(&logpb.ReserveIDs{Count: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	plain := Prepare(c)
	if plain.Command.LeaderTerm != 0 || plain.Command.CallerNode != 0 || plain.Chained || plain.Routine {
		t.Fatalf("a plain proposal reads as %+v", plain)
	}
	plain.Queued() // no function: nothing to call

	calls := 0
	all := []Option{AsRoutine(), DecisionTerm(7), CallerNode(42), OnQueued(func() { calls++ }), Chained()}
	p := Prepare(c, all...)
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
	if p := Prepare(own, all...); p.Command.LeaderTerm != 9 || p.Command.CallerNode != 5 {
		t.Fatalf("a command's own term and caller were replaced: %+v", p.Command)
	}
	if p := Prepare(c, AsRoutine()); !p.Routine || p.Command.LeaderTerm != 0 {
		t.Fatalf("a routine without a term reads as %+v", p)
	}
	if p := Prepare(c, DecisionTerm(3)); p.Routine || p.Command.LeaderTerm != 3 {
		t.Fatalf("a decision term alone reads as %+v", p)
	}
	// A later option counts; a zero one stamps nothing.
	if p := Prepare(c, DecisionTerm(3), CallerNode(4), DecisionTerm(8), CallerNode(6)); p.Command.LeaderTerm != 8 || p.Command.CallerNode != 6 {
		t.Fatalf("repeated options read as %+v, want the later ones", p.Command)
	}
	if p := Prepare(c, DecisionTerm(3), CallerNode(4), DecisionTerm(0), CallerNode(0)); p.Command.LeaderTerm != 3 || p.Command.CallerNode != 4 {
		t.Fatalf("zero options replaced stamps: %+v", p.Command)
	}
}

// optionsProposer records what each call reads through Prepare.
type optionsProposer struct{ got []Proposal }

func (p *optionsProposer) Propose(_ context.Context, c Command, opts ...Option) (*logpb.Result, error) {
	p.got = append(p.got, Prepare(c, opts...))
	return &logpb.Result{}, nil
}

// TestWithAddsOptionsToEveryCall: a proposer from With (Fenced) proposes
// every command with its options, the call's own options after them (so a
// call's own counts), and wrappers nest.
func TestWithAddsOptionsToEveryCall(t *testing.T) {
	c, err := New(&logpb.ReserveIDs{Count: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inner := &optionsProposer{}
	routine := Fenced(With(inner, AsRoutine()), 4)
	for _, call := range [][]Option{nil, {Chained()}} {
		if _, err := routine.Propose(ctx, c, call...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := routine.Propose(ctx, c, DecisionTerm(6), CallerNode(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := Fenced(inner, 5).Propose(ctx, c); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		term, caller     uint64
		routine, chained bool
	}{{4, 0, true, false}, {4, 0, true, true}, {6, 2, true, false}, {5, 0, false, false}}
	if len(inner.got) != len(want) {
		t.Fatalf("%d proposals reached the proposer, want %d", len(inner.got), len(want))
	}
	for i, w := range want {
		g := inner.got[i]
		if g.Command.LeaderTerm != w.term || g.Command.CallerNode != w.caller || g.Routine != w.routine || g.Chained != w.chained {
			t.Errorf("proposal %d read as %+v, want %+v", i, g, w)
		}
	}
}
