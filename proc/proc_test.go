package proc

import (
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// start runs a child that ignores nothing and exits only when told.
func start(t *testing.T, script string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sh: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return cmd, done
}

func TestKillEndsAPausedProcess(t *testing.T) {
	cmd, done := start(t, "sleep 60")
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := Kill(cmd.Process, done, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL", cmd.ProcessState)
	}
}

func TestStopTermsAPausedProcessAndKillsAStubbornOne(t *testing.T) {
	cmd, done := start(t, "sleep 60")
	_ = cmd.Process.Signal(syscall.SIGSTOP)
	// A paused process cannot act on SIGTERM: Stop continues it first.
	if err := Stop(cmd.Process, done, 10*time.Second); err != nil {
		t.Fatalf("paused child: %v", err)
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("paused child ended with %v, want SIGTERM", cmd.ProcessState)
	}
	// A child that ignores SIGTERM: it says "ready" once its trap is set.
	stubborn := exec.Command("sh", "-c", "trap '' TERM; echo ready; exec sleep 60")
	out, err := stubborn.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := stubborn.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("child did not report its trap: %q %v", line, err)
	}
	done = make(chan struct{})
	go func() { _ = stubborn.Wait(); close(done) }()
	err = Stop(stubborn.Process, done, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "SIGTERM") {
		t.Fatalf("stubborn child: %v, want a kill after the grace", err)
	}
}
