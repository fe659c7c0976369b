// Package proc is the one place coordd's launchers (cluster's dev
// launcher, the Jepsen-style harness and the multi-process tests) start
// and end child processes, so they cannot drift. Start runs a child in its
// own process group with its output appended to a log and reaps it.
// Kill and Stop end it: a paused (SIGSTOPped) process is always continued
// first, since it cannot act on SIGTERM while stopped, and Kill does the
// same so that every launcher ends a paused process the same way.
package proc

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// Kill continues p (SIGCONT) and SIGKILLs it, then waits up to wait for
// done (closed by whoever reaps p) to close.
func Kill(p *os.Process, done <-chan struct{}, wait time.Duration) error {
	_ = p.Signal(syscall.SIGCONT)
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("pid %d did not die within %v of SIGKILL", p.Pid, wait)
	}
}

// Stop continues p and asks it to exit (SIGTERM); after grace it is
// SIGKILLed. It returns once done is closed, with an error when p had to
// be killed.
func Stop(p *os.Process, done <-chan struct{}, grace time.Duration) error {
	_ = p.Signal(syscall.SIGCONT)
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		_ = p.Signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("pid %d did not exit within %v of SIGTERM", p.Pid, grace)
	}
}
