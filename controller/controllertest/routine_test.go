package controllertest

import (
	"context"
	"sync/atomic"
	"testing"
)

// TestRunRoutineStopsAndWaits: the routine gets its term, stop cancels it
// and returns only after it has returned, and a second stop is harmless.
func TestRunRoutineStopsAndWaits(t *testing.T) {
	var gotTerm, returned atomic.Uint64
	stop := RunRoutine(t, func(ctx context.Context, term uint64) {
		gotTerm.Store(term)
		<-ctx.Done()
		returned.Store(1)
	}, 9)
	stop()
	if returned.Load() != 1 || gotTerm.Load() != 9 {
		t.Fatalf("after stop: returned %d, term %d; want 1 and 9", returned.Load(), gotTerm.Load())
	}
	stop()
}
