package broadcaster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// sweepDelay debounces the FSM sweep that follows state changes.
const sweepDelay = 10 * time.Millisecond

// termState is the leader memory of one leadership: lock table, tasks and
// their scheduling. It is dropped entirely when the leadership ends.
type termState struct {
	m    *Manager
	term uint64
	// p proposes the term's work: the leader routine's proposer, fenced
	// by term (every task step, create and tombstone prune is a decision
	// of this term and waits for room in a full proposal queue).
	p      commands.Proposer
	ctx    context.Context
	cancel context.CancelFunc
	locks  *lockTable
	// admissions serialises CreateCollection admissions per collection
	// (collection_admission.go).
	admissions *collectionAdmissions

	mu      sync.Mutex
	tasks   map[uint64]*task
	queue   []*task
	stopped bool

	wake   chan struct{} // cap 1: work queued
	gcKick chan struct{} // cap 1: run a GC pass now
	wg     sync.WaitGroup
}

func newTermState(m *Manager, ctx context.Context, cancel context.CancelFunc, term uint64, p commands.Proposer) *termState {
	return &termState{m: m, term: term, p: commands.Fenced(p, term), ctx: ctx, cancel: cancel, locks: newLockTable(), admissions: newCollectionAdmissions(),
		tasks: map[uint64]*task{}, wake: make(chan struct{}, 1), gcKick: make(chan struct{}, 1)}
}

// newTask is the leader memory of bt, admitted now by the Manager's clock.
func (ts *termState) newTask(bt *logpb.BroadcastTask) *task {
	return newTask(bt.Id, bt.MessageType, ts.m.cfg.Clock.Now())
}

// rebuild re-locks every PENDING task of the FSM, in ID order. They were
// admitted under these locks, so they never conflict; if one does (a bug or
// a dirty state), it waits for its locks in FIFO order instead of running
// unlocked, and the conflict is logged.
func (ts *termState) rebuild() []*task {
	st := ts.m.leader.State()
	var recovered []*task
	for _, bt := range st.PendingBroadcasts() {
		t := ts.newTask(bt)
		ts.tasks[t.id] = t
		if bt.State == logpb.BroadcastState_BROADCAST_REPLICATED {
			recovered = append(recovered, t)
			continue
		}
		keys := commands.NormalizeResourceKeys(bt.ResourceKeys)
		g, ok := ts.locks.tryLock(keys)
		if !ok {
			ts.m.log.Error("recovered broadcast conflicts with an earlier pending one; it waits for its keys",
				"id", bt.Id, "message_type", bt.MessageType)
			t.state = stateLocking
			ts.wg.Add(1)
			go ts.lockLate(t, keys)
			continue
		}
		t.guard = g
		recovered = append(recovered, t)
	}
	return recovered
}

func (ts *termState) lockLate(t *task, keys []*logpb.ResourceKey) {
	defer ts.wg.Done()
	g, _, err := ts.locks.lock(ts.ctx, keys, nil)
	if err != nil {
		return
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t.guard = g
	if t.locked() == stateFinished {
		ts.releaseLocked(t)
		return
	}
	ts.enqueueLocked(t)
}

// start launches the workers.
func (ts *termState) start() {
	for i := 0; i < ts.m.cfg.Workers; i++ {
		ts.wg.Add(1)
		go ts.worker()
	}
}

// stop ends the leadership: workers and appends are cancelled, lock waiters
// fail with errNotLeader, and all memory is dropped.
func (ts *termState) stop() {
	ts.cancel()
	ts.locks.close()
	ts.mu.Lock()
	ts.stopped = true
	for _, t := range ts.tasks {
		if t.timer != nil {
			t.timer.Stop()
		}
	}
	ts.mu.Unlock()
	ts.wg.Wait()
	ts.mu.Lock()
	ts.tasks = map[uint64]*task{}
	ts.queue = nil
	ts.mu.Unlock()
}

// loop runs the tombstone GC and the FSM sweep until the leadership ends.
func (ts *termState) loop(closeCh <-chan struct{}) {
	cfg := ts.m.cfg
	gcTick := cfg.Clock.NewTicker(cfg.TombstoneCheckInterval)
	defer gcTick.Stop()
	sweep := cfg.Clock.NewTimer(time.Hour)
	sweep.Stop()
	defer sweep.Stop()
	armed := false
	stateCh := ts.m.leader.StateChanged()
	ts.gc() // a new leader prunes what its predecessor left
	for {
		select {
		case <-ts.ctx.Done():
			return
		case <-closeCh:
			return
		case <-gcTick.Chan():
			ts.gc()
		case <-ts.gcKick:
			ts.gc()
		case <-stateCh:
			stateCh = ts.m.leader.StateChanged()
			if !armed {
				armed = true
				sweep.Reset(sweepDelay)
			}
		case <-sweep.Chan():
			armed = false
			ts.sweep()
		}
	}
}

// ---- scheduling ---------------------------------------------------------------

func (ts *termState) enqueue(t *task) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.enqueueLocked(t)
}

// enqueueLocked asks to run t (see task.enqueue); nothing is queued once
// the leadership has stopped.
func (ts *termState) enqueueLocked(t *task) {
	if !ts.stopped && t.enqueue() {
		ts.pushLocked(t)
	}
}

// pushLocked appends t, just moved to queued, to the run queue.
func (ts *termState) pushLocked(t *task) {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	ts.queue = append(ts.queue, t)
	select {
	case ts.wake <- struct{}{}:
	default:
	}
}

// next takes the next runnable task, or nil when the leadership ends.
func (ts *termState) next() *task {
	for {
		ts.mu.Lock()
		if ts.ctx.Err() != nil {
			ts.mu.Unlock()
			return nil
		}
		for len(ts.queue) > 0 {
			t := ts.queue[0]
			ts.queue[0] = nil
			ts.queue = ts.queue[1:]
			if !t.start() { // finished while queued
				continue
			}
			if len(ts.queue) > 0 { // more work: wake another worker
				select {
				case ts.wake <- struct{}{}:
				default:
				}
			}
			ts.mu.Unlock()
			return t
		}
		ts.mu.Unlock()
		select {
		case <-ts.wake:
		case <-ts.ctx.Done():
			return nil
		}
	}
}

func (ts *termState) worker() {
	defer ts.wg.Done()
	for {
		t := ts.next()
		if t == nil {
			return
		}
		out := ts.step(t)
		ts.after(t, out)
	}
}

// after files a task according to the outcome of its step (see task.end).
func (ts *termState) after(t *task, out outcome) {
	cfg := ts.m.cfg
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.ctx.Err() != nil {
		t.abort()
		return
	}
	switch t.end(out) {
	case stateFinished:
		ts.releaseLocked(t)
		if out == outDone && ts.m.leader.State().TombstoneCount() > cfg.TombstoneMaxCount {
			select {
			case ts.gcKick <- struct{}{}:
			default:
			}
		}
	case stateQueued:
		t.backoff = 0
		ts.pushLocked(t)
	case stateBackoff, stateAssignWait:
		t.backoff = min(max(2*t.backoff, cfg.BackoffInitial), cfg.BackoffMax)
		ts.armLocked(t, t.backoff)
	case stateAwaitingAcks:
		t.backoff = 0
		ts.armLocked(t, cfg.AckSyncUpResend)
	}
}

// armLocked runs t again after d (backoff, or the sync-up resend).
func (ts *termState) armLocked(t *task, d time.Duration) {
	if t.timer != nil {
		t.timer.Stop()
	}
	var tm clockwork.Timer
	tm = ts.m.cfg.Clock.AfterFunc(d, func() {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if t.timer != tm {
			return // superseded
		}
		t.timer = nil
		if t.state == stateAwaitingAcks {
			t.appended = nil // resend: the nodes dedup and ack again
		}
		ts.enqueueLocked(t)
	})
	t.timer = tm
}

// releaseLocked drops t from memory and releases its locks.
func (ts *termState) releaseLocked(t *task) {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.guard.release()
	if ts.tasks[t.id] == t {
		delete(ts.tasks, t.id)
	}
}

// adopt hands a freshly created task and its lock guard to the scheduler.
// It reports false when the task is already tracked (a repeated request),
// in which case guard is released.
func (ts *termState) adopt(bt *logpb.BroadcastTask, guard *lockGuard) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.stopped {
		guard.release() // the next leader re-locks it from the FSM
		return true
	}
	if _, ok := ts.tasks[bt.Id]; ok {
		guard.release()
		return false
	}
	t := ts.newTask(bt)
	if ts.m.cfg.UnsafeReleaseKeysAtCreate {
		guard.release()
	}
	t.guard = guard
	ts.tasks[t.id] = t
	ts.enqueueLocked(t)
	return true
}

// nudge reruns a task waiting for acks (an ack has been committed).
func (ts *termState) nudge(id uint64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	if t == nil || ts.stopped {
		return
	}
	if t.nudge() {
		ts.pushLocked(t)
	}
}

// retry runs a task now with its backoff reset.
func (ts *termState) retry(id uint64) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	if t == nil || t.finishing() {
		bt, ok := ts.m.leader.State().BroadcastTask(id)
		switch {
		case !ok:
			return fmt.Errorf("broadcast %d: %w", id, ErrTaskNotFound)
		case bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE:
			return fmt.Errorf("broadcast %d: %w", id, ErrTaskFinished)
		}
		return fmt.Errorf("broadcast %d is pending but not scheduled by this leader yet", id)
	}
	if t.state == stateLocking {
		return fmt.Errorf("broadcast %d is waiting for its resource keys", id)
	}
	t.backoff = 0
	t.appended = nil
	ts.enqueueLocked(t) // a running task records the rerun
	return nil
}

// finishExternal forgets a task finished outside the scheduler (abandoned).
// A running task is released when its step ends, so no append of it can
// follow a conflicting task's.
func (ts *termState) finishExternal(id uint64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	if t != nil && t.finish() {
		ts.releaseLocked(t)
	}
}

// sweep reconciles memory with the FSM: tasks tombstoned elsewhere are
// released, tasks waiting for acks that got some run, and tasks that failed
// on channel ownership or wait for acks run again when the assignment
// changed.
func (ts *termState) sweep() {
	st := ts.m.leader.State()
	av := st.AssignmentVersion()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.tasks {
		if t.state != stateIdle && !t.state.waiting() {
			continue // the worker, the lock waiter or the queue has it
		}
		bt, ok := st.BroadcastTask(t.id)
		if !ok || bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
			if t.finish() {
				ts.releaseLocked(t)
			}
			continue
		}
		switch {
		case t.state == stateAwaitingAcks && len(bt.Acked) != t.ackedSeen:
			ts.enqueueLocked(t)
		case t.state == stateAssignWait && av != t.assignSeen:
			ts.enqueueLocked(t)
		case t.state == stateAwaitingAcks && av != t.assignSeen:
			// A channel may have moved since the appends: its old owner's
			// ack is refused now, and only the new owner can ack (after
			// deduplicating the re-append). Resend at once rather than
			// after AckSyncUpResend.
			t.appended = nil
			ts.enqueueLocked(t)
		}
	}
}

// gc proposes pruning when tombstones exceed the count or the oldest is
// past its lifetime (the FSM decides; this only avoids empty commands).
func (ts *termState) gc() {
	cfg := ts.m.cfg
	st := ts.m.leader.State()
	n := st.TombstoneCount()
	if n == 0 {
		return
	}
	need := n > cfg.TombstoneMaxCount
	if !need {
		cutoff := cfg.Clock.Now().Add(-cfg.TombstoneMaxLifetime).UnixMilli()
		for _, t := range st.BroadcastTasks() {
			if t.State == logpb.BroadcastState_BROADCAST_TOMBSTONE && t.TombstonedMs <= cutoff {
				need = true
				break
			}
		}
	}
	if !need {
		return
	}
	res, err := commands.CommitNew(ts.ctx, ts.p, &logpb.PruneBroadcastTombstones{
		MaxCount: uint32(cfg.TombstoneMaxCount), MaxLifetimeMs: cfg.TombstoneMaxLifetime.Milliseconds()}, "")
	if err != nil {
		ts.m.log.Warn("pruning broadcast tombstones failed or was refused", "error", err)
		return
	}
	ts.m.log.Debug("pruned broadcast tombstones", "dropped", res.GetNumber())
}
