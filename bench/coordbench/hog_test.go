package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The test binary is the hog child when run with hogArg (as coordbench's
// main is).
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == hogArg {
		hogLoop()
	}
	os.Exit(m.Run())
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// Hogs run until stopped, and stop reaps every one of them; a second stop
// is harmless.
func TestHogsStartAndStop(t *testing.T) {
	h, err := startHogs(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	pids := h.pids()
	if len(pids) != 2 {
		t.Fatalf("%d hogs", len(pids))
	}
	time.Sleep(100 * time.Millisecond)
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("hog %d is not running", pid)
		}
	}
	h.stop()
	for _, pid := range pids {
		if alive(pid) { // reaped by Wait: the pid is gone
			t.Fatalf("hog %d outlived stop", pid)
		}
	}
	h.stop()
}

// A hog that cannot start stops the ones already started.
func TestHogsStartFailureStopsTheOthers(t *testing.T) {
	var started []*exec.Cmd
	n := 0
	_, err := startHogs(3, func() *exec.Cmd {
		n++
		if n == 3 {
			return exec.Command("/nonexistent/coordbench-hog")
		}
		c := exec.Command(os.Args[0], hogArg)
		started = append(started, c)
		return c
	})
	if err == nil {
		t.Fatal("the third hog started")
	}
	for _, c := range started {
		if c.ProcessState == nil || !errors.Is(c.Process.Signal(syscall.Signal(0)), os.ErrProcessDone) {
			t.Fatalf("hog %d still running after the failed start", c.Process.Pid)
		}
	}
}
