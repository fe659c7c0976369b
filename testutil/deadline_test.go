package testutil

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDeadlineHelperHangs is run only as a child process by
// TestDeadlineFailsAHangFast: it hangs on purpose.
func TestDeadlineHelperHangs(t *testing.T) {
	if os.Getenv("TESTUTIL_HANG_CHILD") != "1" {
		t.Skip("child process of TestDeadlineFailsAHangFast only")
	}
	ctx := Deadline(t, 100*time.Millisecond)
	<-ctx.Done()
	select {} // a hang that ignores the context
}

// TestDeadlineFailsAHangFast: a test that hangs past its own deadline ends
// the test binary within seconds, naming the test, with goroutine stacks.
func TestDeadlineFailsAHangFast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout(30*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestDeadlineHelperHangs$", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), "TESTUTIL_HANG_CHILD=1", MultiplierEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ctx.Err() != nil {
		t.Fatalf("child: %v after %v (want it to exit with a failure on its own); output:\n%s", err, took, out.String())
	}
	for _, want := range []string{"TestDeadlineHelperHangs is still running", "hung past its own deadline", "goroutine "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("child output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("the hanging child failed after %v", took)
}

// TestDeadlineContextAndDisarm: the context ends at the deadline, and a
// test that finishes in time disarms the watchdog.
func TestDeadlineContextAndDisarm(t *testing.T) {
	ctx := Deadline(t, time.Minute)
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > Timeout(time.Minute) || time.Until(dl) < Timeout(time.Minute)-10*time.Second {
		t.Fatalf("deadline %v, %v; want about %v from now", dl, ok, Timeout(time.Minute))
	}
	disarm := make(chan struct{})
	fired := make(chan string, 1)
	close(disarm)
	watchdog("x", time.Millisecond, disarm, func(name string, _ time.Duration) { fired <- name })
	select {
	case name := <-fired:
		t.Fatalf("a disarmed watchdog fired for %s", name)
	default:
	}
	watchdog("y", time.Millisecond, make(chan struct{}), func(name string, _ time.Duration) { fired <- name })
	if name := <-fired; name != "y" {
		t.Fatalf("fired for %q, want y", name)
	}
}
