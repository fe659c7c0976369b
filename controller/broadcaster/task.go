package broadcaster

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/fsm"
)

// task is the leader memory of one PENDING (or REPLICATED) task. Its
// scheduling is one state machine; every field below the mutex line is
// guarded by termState.mu, and the state changes only through the
// transition methods in this file (docs/semantics.md#task-scheduling).
// The states:
//
//   - idle: tracked, not scheduled yet (just created or rebuilt), or left
//     by a step that ended with the leadership.
//   - locking: a recovered task waiting for its resource keys (it conflicts
//     with an earlier pending one); not runnable.
//   - queued: in the run queue.
//   - running: a worker runs one step of it.
//   - backoff: its step failed; its timer runs it again.
//   - assignWait: its step failed on channel ownership; its timer runs it
//     again, and so does the sweep as soon as the assignment changes.
//   - awaitingAcks: appended, waiting for the streaming nodes' acks; an ack
//     (nudge) or the sweep runs it again, its timer resends the appends.
//   - finished: tombstoned or abandoned; released and forgotten (terminal).
//
// The moves:
//
//	idle ─enqueue→ queued ─start→ running ─end→ queued | backoff | assignWait | awaitingAcks | finished
//	running ─abort (leadership ended mid-step)→ idle
//	backoff | assignWait | awaitingAcks ─enqueue (timer, retry, nudge, sweep)→ queued
//	locking ─locked→ idle (then enqueue), or finished when a finish was requested meanwhile
//	every state but running and locking ─finish→ finished
//
// A running or locking task cannot change state when an event arrives: the
// worker or the lock waiter owns it. Those events are recorded in pending
// and honoured when the step ends or the locks arrive. pending is therefore
// not a state of its own but the strongest request made during that time
// (a finish beats a retry, which beats an ack nudge), and it is empty in
// every other state.
type task struct {
	id       uint64
	msgType  string
	guard    *lockGuard // nil for REPLICATED tasks (they hold no lock)
	admitted time.Time  // from the Manager's clock

	// Guarded by termState.mu.
	state   taskState
	pending request
	backoff time.Duration
	timer   clockwork.Timer // backoff or sync-up resend timer
	// appended: ack_sync_up targets appended in this leadership, with the
	// PChannel term of the append (the acks come from the nodes). A target
	// whose PChannel has moved to another term since is appended again:
	// the node that took the append may have lost its session before its
	// ack landed, and only the current owner can ack (after deduplicating
	// the re-append).
	appended   map[string]int64
	ackedSeen  int                   // acks its last step saw (awaitingAcks)
	assignSeen fsm.AssignmentVersion // assignment version its last step used
	// executionObserved latches the execution-duration metric, observed at
	// the first completion attempt. A task whose callback fails attempts
	// completion again from any state, so it is a once-per-task mark, not a
	// scheduling state.
	executionObserved bool
}

// taskState is where a task stands in its scheduling (see task).
type taskState uint8

const (
	stateIdle taskState = iota
	stateLocking
	stateQueued
	stateRunning
	stateBackoff
	stateAssignWait
	stateAwaitingAcks
	stateFinished
)

var stateNames = [...]string{"idle", "locking", "queued", "running", "backoff", "assignWait", "awaitingAcks", "finished"}

func (s taskState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("taskState(%d)", s)
}

// waiting reports whether the task waits for something to run it again.
func (s taskState) waiting() bool {
	return s == stateBackoff || s == stateAssignWait || s == stateAwaitingAcks
}

// request is an event recorded while a task is running or locking, ordered
// by strength: a stronger one replaces a weaker one.
type request uint8

const (
	requestNone   request = iota
	requestNudge          // an ack arrived: rerun if the step ends waiting for acks
	requestRerun          // Retry (or an enqueue): run again at once
	requestFinish         // abandoned: release when the step ends
)

func (t *task) record(r request) { t.pending = max(t.pending, r) }

// outcome is what a step reports to the scheduler.
type outcome int

const (
	outDone    outcome = iota // tombstoned or gone
	outBackoff                // failed: retry after the backoff
	outAssign                 // failed on channel ownership: retry after the backoff or on an assignment change
	outIdle                   // waiting for acks from streaming nodes
)

func newTask(id uint64, msgType string, admitted time.Time) *task {
	return &task{id: id, msgType: msgType, admitted: admitted}
}

// finishing reports whether the task is finished or will be when its step
// or lock wait ends.
func (t *task) finishing() bool {
	return t.state == stateFinished || t.pending == requestFinish
}

// enqueue asks to run the task. It reports whether the task moved to
// queued (the caller appends it to the run queue and stops its timer). A
// running task records a rerun instead; a locking, queued or finished task
// ignores the request.
func (t *task) enqueue() bool {
	switch {
	case t.state == stateIdle || t.state.waiting():
		t.state = stateQueued
		return true
	case t.state == stateRunning:
		t.record(requestRerun)
	}
	return false
}

// start hands a task taken from the run queue to a worker. It reports false
// for a task finished while queued (it is skipped).
func (t *task) start() bool {
	if t.state != stateQueued {
		return false
	}
	t.state, t.pending = stateRunning, requestNone
	return true
}

// end files a running task by its step's outcome and what was requested
// meanwhile, and returns the new state; a task that is not running is left
// as it is. The caller arms the timer of a waiting task, queues a queued
// one and releases a finished one.
func (t *task) end(out outcome) taskState {
	if t.state != stateRunning {
		return t.state
	}
	p := t.pending
	t.pending = requestNone
	switch {
	case p == requestFinish || out == outDone:
		t.state = stateFinished
	case p == requestRerun || (p == requestNudge && out == outIdle):
		t.state = stateQueued
	case out == outIdle:
		t.state = stateAwaitingAcks
	case out == outAssign:
		t.state = stateAssignWait
	default:
		t.state = stateBackoff
	}
	return t.state
}

// abort leaves a running task idle when its leadership ended mid-step.
func (t *task) abort() {
	if t.state == stateRunning {
		t.state, t.pending = stateIdle, requestNone
	}
}

// locked reports that a locking task got its keys: it becomes idle (the
// caller enqueues it), or finished if a finish was requested meanwhile.
// A task that is not locking is left as it is.
func (t *task) locked() taskState {
	if t.state != stateLocking {
		return t.state
	}
	if t.pending == requestFinish {
		t.state = stateFinished
	} else {
		t.state = stateIdle
	}
	t.pending = requestNone
	return t.state
}

// finish marks the task finished. It reports whether the caller releases it
// now; a running or locking task records the finish for later, and an
// already finished task needs nothing.
func (t *task) finish() bool {
	switch t.state {
	case stateFinished:
		return false
	case stateRunning, stateLocking:
		t.record(requestFinish)
		return false
	}
	t.state = stateFinished
	return true
}

// nudge reports an ack committed for the task. It reports whether the task
// moved to queued: a task awaiting acks runs again, a running one records
// the nudge, any other ignores it.
func (t *task) nudge() bool {
	switch t.state {
	case stateRunning:
		t.record(requestNudge)
	case stateAwaitingAcks:
		return t.enqueue()
	}
	return false
}
