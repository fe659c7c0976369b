package harness

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	supervise "github.com/coordd/coordd/proc"
)

// ProcState is what the harness did last to a process.
type ProcState int

const (
	Stopped ProcState = iota
	Running
	Paused
)

func (s ProcState) String() string {
	return [...]string{"stopped", "running", "paused"}[s]
}

// Exit is a process exit the harness did not ask for (a crash).
type Exit struct {
	Member string `json:"member"`
	At     int64  `json:"at_ns"`
	Err    string `json:"error"`
}

type proc struct {
	child *supervise.Child
	// trial: started by TryStart, whose exit is expected; adopted: still
	// running after TryStart's wait, so a later exit is a crash like any
	// other.
	trial, adopted bool
}

// procTable is the process bookkeeping Cluster (members) and
// StreamingNodes share: one slot per process, what the harness did last
// to it, and the exits it did not cause. mu also guards the owner's own
// start-time fields (Cluster.join).
type procTable struct {
	t    testing.TB
	t0   time.Time
	ids  []string // slot i's name in errors and exits
	logs []string // slot i's log

	mu    sync.Mutex
	state []ProcState
	procs []*proc
	exits []Exit
}

func newProcTable(t testing.TB, t0 time.Time, n int) procTable {
	return procTable{t: t, t0: t0, ids: make([]string, n), logs: make([]string, n),
		state: make([]ProcState, n), procs: make([]*proc, n)}
}

// startLocked starts spec as slot i; the caller holds pt.mu. A trial's
// exit is told to notify (buffered) and is a crash only once adopted.
func (pt *procTable) startLocked(i int, spec supervise.Spec, trial bool, notify chan<- error) (*proc, error) {
	if pt.state[i] != Stopped {
		return nil, fmt.Errorf("start %s: already %s", pt.ids[i], pt.state[i])
	}
	spec.Name, spec.Log, spec.DieWithParent = pt.ids[i], pt.logs[i], true
	p := &proc{trial: trial}
	child, err := supervise.Start(spec, func(err error) {
		if notify != nil {
			notify <- err
		}
		pt.exited(i, p, err)
	})
	if err != nil {
		return nil, err
	}
	p.child = child
	pt.procs[i], pt.state[i] = p, Running
	return p, nil
}

// banner is the log line that marks where a run of slot i begins.
func (pt *procTable) banner(i int, doing string) string {
	return fmt.Sprintf("=== harness: %s %s at %.3fs", doing, pt.ids[i], time.Since(pt.t0).Seconds())
}

// exited records slot i's process p ending with err; an exit the harness
// did not cause (Kill and Close forget the proc first) is a crash.
func (pt *procTable) exited(i int, p *proc, err error) {
	pt.mu.Lock()
	mine := pt.procs[i] == p
	if mine {
		pt.procs[i], pt.state[i] = nil, Stopped
	}
	crash := mine && (!p.trial || p.adopted)
	if crash {
		pt.exits = append(pt.exits, Exit{Member: pt.ids[i], At: int64(time.Since(pt.t0)), Err: fmt.Sprint(err)})
	}
	pt.mu.Unlock()
	if crash {
		pt.t.Logf("UNEXPECTED EXIT of %s at %.3fs: %v (log %s)", pt.ids[i], time.Since(pt.t0).Seconds(), err, pt.logs[i])
	}
}

// State is slot i's process state.
func (pt *procTable) State(i int) ProcState {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.state[i]
}

// take forgets slot i's process (so its exit counts as deliberate).
func (pt *procTable) take(i int) *proc {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	p := pt.procs[i]
	pt.procs[i], pt.state[i] = nil, Stopped
	return p
}

// Kill SIGKILLs process i by PID (continuing it first if paused) and waits
// for it to die. Killing a stopped process is a no-op.
func (pt *procTable) Kill(i int) error {
	p := pt.take(i)
	if p == nil {
		return nil
	}
	if err := p.child.Kill(10 * time.Second); err != nil {
		return fmt.Errorf("%s: %w", pt.ids[i], err)
	}
	return nil
}

// Pause SIGSTOPs process i.
func (pt *procTable) Pause(i int) error { return pt.signal(i, syscall.SIGSTOP, Running, Paused) }

// Resume SIGCONTs process i.
func (pt *procTable) Resume(i int) error { return pt.signal(i, syscall.SIGCONT, Paused, Running) }

func (pt *procTable) signal(i int, sig syscall.Signal, from, to ProcState) error {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.state[i] != from || pt.procs[i] == nil {
		return fmt.Errorf("%v to %s: it is %s", sig, pt.ids[i], pt.state[i])
	}
	if err := pt.procs[i].child.Process.Signal(sig); err != nil {
		return err
	}
	pt.state[i] = to
	return nil
}

// PID is process i's ID, or 0.
func (pt *procTable) PID(i int) int {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if p := pt.procs[i]; p != nil {
		return p.child.Process.Pid
	}
	return 0
}

// Exits lists the process exits the harness did not cause.
func (pt *procTable) Exits() []Exit {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return append([]Exit(nil), pt.exits...)
}
