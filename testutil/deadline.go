package testutil

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"testing"
	"time"
)

// Deadline gives a test that could hang (it waits on channels, locks or
// goroutines of the code under test) its own bound, so a hang fails in
// seconds with a clear message instead of running into go test's global
// timeout minutes later. It returns a context that ends at Timeout(d), for
// the test to hand to the calls that may block. If the test, including its
// cleanups, is still running Timeout(d)+grace after Deadline was called, the
// watchdog prints which test hung and panics with every goroutine's stack
// (as the global timeout would), which ends the test binary.
//
// Call it first in the test: the watchdog is disarmed by the last cleanup to
// run, so a hang inside another cleanup is caught too.
func Deadline(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	limit := Timeout(d)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	disarm := make(chan struct{})
	t.Cleanup(func() { close(disarm) })
	t.Cleanup(cancel)
	name := t.Name()
	go watchdog(name, limit+deadlineGrace, disarm, hang)
	return ctx
}

// deadlineGrace lets the code under test react to the context's end (and
// the test fail on its own, with its own message) before the watchdog
// fires.
const deadlineGrace = 2 * time.Second

// hang reports a test that outlived its deadline and ends the binary.
func hang(name string, after time.Duration) {
	msg := fmt.Sprintf("%s is still running %v after it started: it hung past its own deadline (testutil.Deadline); goroutines follow", name, after)
	fmt.Fprintln(os.Stderr, "FAIL: "+msg)
	debug.SetTraceback("all")
	panic(msg)
}

func watchdog(name string, after time.Duration, disarm <-chan struct{}, fire func(string, time.Duration)) {
	timer := time.NewTimer(after)
	defer timer.Stop()
	select {
	case <-disarm:
	case <-timer.C:
		fire(name, after)
	}
}
