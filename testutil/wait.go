// Package testutil holds the waiting helpers every coordd test shares.
//
// Timeouts scale with the environment variable COORDD_TEST_MULTIPLIER (a
// positive number, default 1), so a loaded or slow machine can give every
// wait more time without editing a test: COORDD_TEST_MULTIPLIER=3 go test ...
package testutil

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// MultiplierEnv names the environment variable that scales every timeout.
const MultiplierEnv = "COORDD_TEST_MULTIPLIER"

// DefaultWait is how long Eventually waits before the multiplier.
const DefaultWait = 5 * time.Second

// pollInterval is how often Eventually checks its condition.
const pollInterval = 2 * time.Millisecond

// Multiplier is the factor read from COORDD_TEST_MULTIPLIER; an unset,
// malformed or non-positive value counts as 1.
func Multiplier() float64 {
	v := os.Getenv(MultiplierEnv)
	if v == "" {
		return 1
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 1
	}
	return f
}

// Timeout scales d by Multiplier. Use it for every upper bound a test
// waits for or asserts on.
func Timeout(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Multiplier())
}

// Eventually polls cond until it holds and fails the test, naming what it
// waited for, when it does not hold within Timeout(DefaultWait).
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, DefaultWait, what, cond)
}

// EventuallyWithin is Eventually with another unscaled wait.
func EventuallyWithin(t testing.TB, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyEvery(t, wait, pollInterval, what, cond)
}

// EventuallyEvery is EventuallyWithin checking cond every interval: for
// conditions that cost something to check (an RPC to another process).
func EventuallyEvery(t testing.TB, wait, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout(wait))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Timeout(wait), what)
			return
		}
		time.Sleep(interval)
	}
}

// Never fails the test if cond holds at any check during window (real
// time, not scaled: a longer window only makes the check stronger). It is
// the negative twin of Eventually, for "this must not happen" checks.
func Never(t testing.TB, what string, window time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(window)
	for {
		if cond() {
			t.Fatalf("unexpectedly: %s", what)
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(pollInterval)
	}
}
