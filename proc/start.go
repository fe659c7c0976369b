package proc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Spec is a child process to start: what every coordd launcher (cluster's
// dev launcher, the Jepsen-style harness, the multi-process tests) runs
// the same way.
type Spec struct {
	// Name identifies the child in errors ("n1", "sn2").
	Name string
	// Path and Args are the command line (Args without the program name).
	Path string
	Args []string
	// Log receives the child's stdout and stderr, appended; its directory
	// is created.
	Log string
	// Banner, when set, is written to Log before the child starts, so one
	// log that spans restarts shows where each run begins.
	Banner string
	// Tee, when set, also receives the output (e.g. to read the last line
	// of a run that is expected to exit).
	Tee io.Writer
	// DieWithParent has the kernel SIGKILL the child when the parent dies
	// without reaping it (a test binary killed by its timeout).
	DieWithParent bool
}

// Child is a started process. A goroutine of Start reaps it.
type Child struct {
	// Process is the running child, for signals and its PID.
	Process *os.Process
	done    chan struct{}
}

// Start starts s in its own process group (terminal signals do not reach
// it). When the child exits, the reaping goroutine calls onExit (if not
// nil) with the wait error, closes the log and then closes Done; onExit
// may take the caller's locks, so the caller must not hold them while
// waiting on Done.
func Start(s Spec, onExit func(error)) (*Child, error) {
	if err := os.MkdirAll(filepath.Dir(s.Log), 0o755); err != nil {
		return nil, fmt.Errorf("start %s: log dir: %w", s.Name, err)
	}
	logf, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", s.Name, err)
	}
	if s.Banner != "" {
		fmt.Fprintln(logf, s.Banner)
	}
	cmd := exec.Command(s.Path, s.Args...)
	var out io.Writer = logf
	if s.Tee != nil {
		out = io.MultiWriter(logf, s.Tee)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.DieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	c := &Child{Process: cmd.Process, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if onExit != nil {
			onExit(err)
		}
		logf.Close()
		close(c.done)
	}()
	return c, nil
}

// Done is closed once the child has been reaped and its log closed.
func (c *Child) Done() <-chan struct{} { return c.done }

// Kill is Kill on this child.
func (c *Child) Kill(wait time.Duration) error { return Kill(c.Process, c.done, wait) }

// Stop is Stop on this child.
func (c *Child) Stop(grace time.Duration) error { return Stop(c.Process, c.done, grace) }
