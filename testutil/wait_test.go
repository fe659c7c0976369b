package testutil

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestMultiplierReadsTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		env  string
		want float64
	}{{"", 1}, {"3", 3}, {"0.5", 0.5}, {"0", 1}, {"-2", 1}, {"fast", 1}} {
		t.Setenv(MultiplierEnv, c.env)
		if got := Multiplier(); got != c.want {
			t.Errorf("%s=%q: multiplier %v, want %v", MultiplierEnv, c.env, got, c.want)
		}
	}
	t.Setenv(MultiplierEnv, "4")
	if got := Timeout(time.Second); got != 4*time.Second {
		t.Errorf("Timeout(1s) with multiplier 4 = %v, want 4s", got)
	}
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	Eventually(t, "three polls", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("condition polled %d times, want 3", n.Load())
	}
}

// recorder is a testing.TB whose Fatalf only records the message.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

func TestEventuallyFailsNamingWhatItWaitedFor(t *testing.T) {
	t.Setenv(MultiplierEnv, "1")
	r := &recorder{TB: t}
	start := time.Now()
	EventuallyWithin(r, 20*time.Millisecond, "the impossible", func() bool { return false })
	if !strings.Contains(r.msg, "the impossible") {
		t.Fatalf("failure message %q does not name what was awaited", r.msg)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("Eventually gave up after %v, before its 20ms wait", el)
	}
}

func TestNeverFailsWhenTheConditionHolds(t *testing.T) {
	r := &recorder{TB: t}
	var n atomic.Int32
	Never(r, "the third poll", time.Second, func() bool { return n.Add(1) >= 3 })
	if !strings.Contains(r.msg, "the third poll") {
		t.Fatalf("Never did not fail naming what happened: %q", r.msg)
	}
	r = &recorder{TB: t}
	start := time.Now()
	Never(r, "nothing", 20*time.Millisecond, func() bool { return false })
	if r.msg != "" || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("Never on a false condition: msg %q after %v", r.msg, time.Since(start))
	}
}
