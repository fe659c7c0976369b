package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// hogArg is the hidden subcommand a CPU hog child runs as: coordbench
// re-executes itself with it as its only argument (main checks for it
// before flag parsing) and the child spins forever.
const hogArg = "__cpu-hog"

// hogLoop is the child: one goroutine in a busy loop keeps one core busy
// (the runtime's other threads stay idle).
func hogLoop() {
	//lint:ignore SA5002 spinning on one core is this child's whole purpose
	for {
	}
}

// hogs are CPU hog child processes. They run at coordbench's own priority
// (a child inherits its nice value: run coordbench un-niced for a hog at
// normal priority) and die with coordbench even when it is killed
// (Pdeathsig), so no hog outlives a run.
type hogs struct {
	cmds []*exec.Cmd
}

// startHogs starts n hogs of cmd (a re-exec of this binary with hogArg
// when cmd is nil); on an error the ones started are stopped.
func startHogs(n int, cmd func() *exec.Cmd) (*hogs, error) {
	if cmd == nil {
		cmd = selfHog
	}
	h := &hogs{}
	for range n {
		c := cmd()
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			h.stop()
			return nil, fmt.Errorf("start a CPU hog: %w", err)
		}
		h.cmds = append(h.cmds, c)
	}
	return h, nil
}

func selfHog() *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return exec.Command(self, hogArg)
}

// stop SIGKILLs every hog and reaps it; calling it again does nothing.
func (h *hogs) stop() {
	if h == nil {
		return
	}
	for _, c := range h.cmds {
		if err := c.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			fmt.Fprintf(os.Stderr, "coordbench: kill CPU hog %d: %v\n", c.Process.Pid, err)
		}
		_ = c.Wait()
	}
	h.cmds = nil
}

// pids are the running hogs' process IDs.
func (h *hogs) pids() []int {
	var out []int
	for _, c := range h.cmds {
		out = append(out, c.Process.Pid)
	}
	return out
}
