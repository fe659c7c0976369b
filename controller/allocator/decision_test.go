package allocator

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
)

// TestAllocatorProposalsCarryTheirTerm: every window extension and ID
// reservation is proposed as a decision of the term the allocator served
// in, so a newer leader's establishment fences it in Apply.
func TestAllocatorProposalsCarryTheirTerm(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.UnixMilli(1_000_000))
	l := controllertest.NewLeader(t, clk, 4)
	tso, ids := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: clk}), NewIDs(l, 10)
	ctx := context.Background()
	if _, err := tso.Alloc(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Alloc(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := tso.Refresh(ctx, 4); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if err := tso.Refresh(ctx, 4); err != nil {
		t.Fatal(err)
	}
	applied, terms := l.Applied()[1:], l.DecisionTerms()[1:] // after LeaderEstablished
	if len(applied) < 3 {
		t.Fatalf("only %d proposals; the test needs extensions and a reservation", len(applied))
	}
	for i, term := range terms {
		if term != 4 {
			t.Errorf("proposal %d (%T) carried decision term %d, want 4", i, applied[i], term)
		}
	}
}

// TestTSOAllocViaProposesThroughItsProposer: a window extension an
// allocation needs goes through the proposer the caller names (a leader
// routine's seal round passes its own, marked as a routine's), still as a
// decision of the current term; Alloc's goes through the leader.
func TestTSOAllocViaProposesThroughItsProposer(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.UnixMilli(1_000_000))
	l := controllertest.NewLeader(t, clk, 4)
	tso := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: clk})
	ctx := context.Background()
	if _, err := tso.AllocVia(ctx, 1, commands.With(l, commands.AsRoutine())); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if _, err := tso.Alloc(ctx, 1); err != nil {
		t.Fatal(err)
	}
	applied, terms, marks := l.Applied(), l.DecisionTerms(), l.RoutineMarks()
	var got []bool
	for i, b := range applied {
		if _, ok := b.(*logpb.ExtendTSOWindow); ok {
			got = append(got, marks[i])
			if terms[i] != 4 {
				t.Errorf("extension %d decided in term %d, want 4", len(got), terms[i])
			}
		}
	}
	if len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("routine marks of the extensions %v, want [true false] (AllocVia's through its proposer, Alloc's through the leader)", got)
	}
}
