package controllertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/testutil"
)

// RunRoutine runs a leader routine (a controller's Run) at term in a
// goroutine, proposing through p as raftnode's routines do (see
// raftnode.LeaderRoutine: decisions of term, marked commands.AsRoutine),
// and returns a stop function: it cancels the routine's ctx and
// waits for it to return, failing the test when it does not within
// testutil.Timeout(testutil.DefaultWait). stop is idempotent and also
// registered with t.Cleanup.
func RunRoutine(t testing.TB, p commands.Proposer, run func(ctx context.Context, term uint64, p commands.Proposer), term uint64) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, term, commands.Fenced(commands.With(p, commands.AsRoutine()), term))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(testutil.Timeout(testutil.DefaultWait)):
				t.Errorf("the leader routine did not return after its ctx was cancelled")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
