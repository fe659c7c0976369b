package controllertest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// TestRunRoutineStopsAndWaits: the routine gets its term and a proposer
// that proposes as a routine of that term, stop cancels it and returns
// only after it has returned, and a second stop is harmless.
func TestRunRoutineStopsAndWaits(t *testing.T) {
	l := NewLeader(t, NewClock(), 9)
	var gotTerm, returned atomic.Uint64
	proposed := make(chan struct{})
	stop := RunRoutine(t, l, func(ctx context.Context, term uint64, p commands.Proposer) {
		gotTerm.Store(term)
		if _, err := commands.CommitNew(ctx, p, &logpb.ReserveIDs{Count: 1}, ""); err != nil {
			t.Errorf("the routine's proposal: %v", err)
		}
		close(proposed)
		<-ctx.Done()
		returned.Store(1)
	}, 9)
	<-proposed
	stop()
	if returned.Load() != 1 || gotTerm.Load() != 9 {
		t.Fatalf("after stop: returned %d, term %d; want 1 and 9", returned.Load(), gotTerm.Load())
	}
	stop()
	terms, marks := l.DecisionTerms(), l.RoutineMarks()
	if n := len(terms); n != 2 || terms[1] != 9 || !marks[1] || marks[0] {
		t.Fatalf("decision terms %v, routine marks %v; want the routine's proposal last, of term 9 and marked", terms, marks)
	}
}
