package controllertest

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/testutil"
)

// Epoch is where every fake clock starts: a fixed, recognisable instant
// far from the zero time and from the real clock.
var Epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// NewClock returns a fake clock at Epoch. Its timers and tickers fire
// only when the test calls Advance.
func NewClock() *clockwork.FakeClock { return clockwork.NewFakeClockAt(Epoch) }

// WaitForTimers blocks until at least n timers, tickers or sleepers are
// waiting on clock, so an Advance that follows is seen by all of them. It
// fails the test after testutil.Timeout(testutil.DefaultWait).
func WaitForTimers(t testing.TB, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(testutil.DefaultWait))
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers on the fake clock: %v", n, err)
	}
}

// AdvanceUntil advances clock by step between checks of cond until cond
// holds, failing the test after testutil.Timeout(testutil.DefaultWait) of
// real time. It is for waits that pass through retries and backoffs whose
// exact number the test does not care about.
func AdvanceUntil(t testing.TB, clock *clockwork.FakeClock, step time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, what, func() bool {
		if cond() {
			return true
		}
		clock.Advance(step)
		return false
	})
}
