package broadcaster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// sweepDelay debounces the FSM sweep that follows state changes.
const sweepDelay = 10 * time.Millisecond

// termState is the leader memory of one leadership: lock table, tasks and
// their scheduling. It is dropped entirely when the leadership ends.
type termState struct {
	m      *Manager
	term   uint64
	ctx    context.Context
	cancel context.CancelFunc
	locks  *lockTable

	mu      sync.Mutex
	tasks   map[uint64]*task
	queue   []*task
	stopped bool

	wake   chan struct{} // cap 1: work queued
	gcKick chan struct{} // cap 1: run a GC pass now
	wg     sync.WaitGroup
}

// task is the leader memory of one PENDING (or REPLICATED) task.
type task struct {
	id       uint64
	msgType  string
	guard    *lockGuard // nil for REPLICATED tasks (they hold no lock)
	admitted time.Time

	// Guarded by termState.mu.
	locking  bool // waiting for its locks (recovery conflict); not runnable
	queued   bool
	running  bool
	finished bool
	retryNow bool // Retry while running: run again at once
	ackNudge bool // an ack arrived while running
	backoff  time.Duration
	timer    *time.Timer // backoff or sync-up resend timer
	// appended: ack_sync_up targets appended in this leadership (the acks
	// come from the nodes).
	appended     map[string]bool
	awaitingAcks bool
	ackedSeen    int
	onAssign     bool                  // the last failure was about channel ownership
	assignSeen   fsm.AssignmentVersion // assignment version its last step used
	executed     bool                  // execution duration observed
}

type outcome int

const (
	outDone    outcome = iota // tombstoned or gone
	outBackoff                // failed: retry after the backoff
	outIdle                   // waiting for acks from streaming nodes
)

func newTermState(m *Manager, ctx context.Context, cancel context.CancelFunc, term uint64) *termState {
	return &termState{m: m, term: term, ctx: ctx, cancel: cancel, locks: newLockTable(),
		tasks: map[uint64]*task{}, wake: make(chan struct{}, 1), gcKick: make(chan struct{}, 1)}
}

func newTask(bt *logpb.BroadcastTask) *task {
	return &task{id: bt.Id, msgType: bt.MessageType, admitted: time.Now()}
}

// rebuild re-locks every PENDING task of the FSM, in ID order. They were
// admitted under these locks, so they never conflict; if one does (a bug or
// a dirty state), it waits for its locks in FIFO order instead of running
// unlocked, and the conflict is logged.
func (ts *termState) rebuild() []*task {
	st := ts.m.leader.State()
	var recovered []*task
	for _, bt := range st.PendingBroadcasts() {
		t := newTask(bt)
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
			t.locking = true
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
	t.guard, t.locking = g, false
	if t.finished {
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
// fail with ErrNotLeader, and all memory is dropped.
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
	gcTick := time.NewTicker(cfg.TombstoneCheckInterval)
	defer gcTick.Stop()
	sweep := time.NewTimer(time.Hour)
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
		case <-gcTick.C:
			ts.gc()
		case <-ts.gcKick:
			ts.gc()
		case <-stateCh:
			stateCh = ts.m.leader.StateChanged()
			if !armed {
				armed = true
				sweep.Reset(sweepDelay)
			}
		case <-sweep.C:
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

func (ts *termState) enqueueLocked(t *task) {
	if ts.stopped || t.finished || t.locking || t.queued {
		return
	}
	if t.running {
		t.retryNow = true
		return
	}
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.queued = true
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
			t.queued = false
			if t.finished {
				continue
			}
			t.running, t.retryNow, t.ackNudge = true, false, false
			t.awaitingAcks, t.onAssign = false, false
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

// after files a task according to the outcome of its step.
func (ts *termState) after(t *task, out outcome) {
	cfg := ts.m.cfg
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t.running = false
	if ts.ctx.Err() != nil {
		return
	}
	if t.finished || out == outDone {
		t.finished = true
		ts.releaseLocked(t)
		if out == outDone && ts.m.leader.State().TombstoneCount() > cfg.TombstoneMaxCount {
			select {
			case ts.gcKick <- struct{}{}:
			default:
			}
		}
		return
	}
	switch out {
	case outBackoff:
		if t.retryNow {
			t.backoff = 0
			ts.enqueueLocked(t)
			return
		}
		t.backoff = min(max(2*t.backoff, cfg.BackoffInitial), cfg.BackoffMax)
		ts.armLocked(t, t.backoff)
	case outIdle:
		t.backoff = 0
		if t.retryNow || t.ackNudge {
			ts.enqueueLocked(t)
			return
		}
		t.awaitingAcks = true
		ts.armLocked(t, cfg.AckSyncUpResend)
	}
}

// armLocked runs t again after d (backoff, or the sync-up resend).
func (ts *termState) armLocked(t *task, d time.Duration) {
	if t.timer != nil {
		t.timer.Stop()
	}
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if t.timer != tm {
			return // superseded
		}
		t.timer = nil
		if t.awaitingAcks {
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
	t := newTask(bt)
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
	if t == nil {
		return
	}
	if t.running {
		t.ackNudge = true
		return
	}
	if t.awaitingAcks {
		ts.enqueueLocked(t)
	}
}

// retry runs a task now with its backoff reset.
func (ts *termState) retry(id uint64) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	if t == nil || t.finished {
		bt, ok := ts.m.leader.State().BroadcastTask(id)
		switch {
		case !ok:
			return fmt.Errorf("broadcast %d: %w", id, ErrTaskNotFound)
		case bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE:
			return fmt.Errorf("broadcast %d: %w", id, ErrTaskFinished)
		}
		return fmt.Errorf("broadcast %d is pending but not scheduled by this leader yet", id)
	}
	if t.locking {
		return fmt.Errorf("broadcast %d is waiting for its resource keys", id)
	}
	t.backoff = 0
	t.appended = nil
	if t.running {
		t.retryNow = true
		return nil
	}
	ts.enqueueLocked(t)
	return nil
}

// finishExternal forgets a task finished outside the scheduler (abandoned).
// A running task is released when its step ends, so no append of it can
// follow a conflicting task's.
func (ts *termState) finishExternal(id uint64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	if t == nil {
		return
	}
	t.finished = true
	if !t.running && !t.locking {
		ts.releaseLocked(t)
	}
}

// sweep reconciles memory with the FSM: tasks tombstoned elsewhere are
// released, tasks waiting for acks that got some run, and tasks that failed
// on channel ownership run again when the assignment changed.
func (ts *termState) sweep() {
	st := ts.m.leader.State()
	av := st.AssignmentVersion()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.tasks {
		if t.running || t.finished || t.locking || t.queued {
			continue
		}
		bt, ok := st.BroadcastTask(t.id)
		if !ok || bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
			t.finished = true
			ts.releaseLocked(t)
			continue
		}
		switch {
		case t.awaitingAcks && len(bt.Acked) != t.ackedSeen:
			ts.enqueueLocked(t)
		case t.onAssign && av != t.assignSeen:
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
		cutoff := cfg.Now().Add(-cfg.TombstoneMaxLifetime).UnixMilli()
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
	res, err := ts.m.leader.Propose(ts.ctx, &logpb.PruneBroadcastTombstones{
		MaxCount: uint32(cfg.TombstoneMaxCount), MaxLifetimeMs: cfg.TombstoneMaxLifetime.Milliseconds()}, "")
	switch {
	case err != nil:
		ts.m.log.Warn("pruning broadcast tombstones failed", "error", err)
	case res.Rejection != nil:
		ts.m.log.Warn("pruning broadcast tombstones refused", "error", res.Rejection.Message)
	default:
		ts.m.log.Debug("pruned broadcast tombstones", "dropped", res.GetNumber())
	}
}

// ---- creating ---------------------------------------------------------------------

// create commits the task under guard and hands both to the scheduler. The
// proposal runs on the leadership's context, not the caller's: when the
// caller gives up, the outcome is still learnt and the guard either goes to
// the task or is released, so no committed task is ever left unlocked.
func (ts *termState) create(ctx context.Context, body *logpb.CreateBroadcast, guard *lockGuard, requestID string) (uint64, bool, error) {
	type out struct {
		id  uint64
		dup bool
		err error
	}
	if requestID == "" {
		requestID = newRequestID()
	}
	ch := make(chan out, 1)
	ts.mu.Lock()
	if ts.stopped {
		ts.mu.Unlock()
		guard.release()
		return 0, false, ErrNotLeader
	}
	ts.wg.Add(1) // never concurrent with stop's Wait: stop sets stopped first
	ts.mu.Unlock()
	go func() {
		defer ts.wg.Done()
		if err := ctx.Err(); err != nil {
			guard.release()
			ch <- out{err: err}
			return
		}
		res, err := ts.m.proposeRetrying(ts.ctx, body, requestID)
		switch {
		case err != nil:
			guard.release()
			if ts.ctx.Err() != nil && !errors.Is(err, ErrNotLeader) {
				err = fmt.Errorf("%w (leadership ended while creating the task: %v)", ErrNotLeader, err)
			}
			ch <- out{err: err}
		case res.Rejection != nil:
			guard.release()
			ch <- out{err: rejectionError(res.Rejection)}
		default:
			c := res.GetBroadcast()
			if c == nil {
				guard.release()
				ch <- out{err: fmt.Errorf("broadcaster: unexpected CreateBroadcast result %v", res)}
				return
			}
			dup := c.Duplicated
			if dup {
				guard.release()
			} else if bt, ok := ts.m.leader.State().BroadcastTask(c.BroadcastId); !ok {
				guard.release() // pruned already (a very late repeat of a request ID)
			} else if !ts.adopt(bt, guard) {
				dup = true
			}
			ch <- out{id: c.BroadcastId, dup: dup}
		}
	}()
	select {
	case o := <-ch:
		return o.id, o.dup, o.err
	case <-ctx.Done():
		return 0, false, ctx.Err()
	}
}

// ---- executing ---------------------------------------------------------------------

var errTaskFinishedHere = errors.New("task finished (abandoned) meanwhile")

// finished reports whether task id was finished outside its step.
func (ts *termState) finished(id uint64) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	return t == nil || t.finished
}

// notAssignedError: the FSM does not name a writable owner for a channel.
type notAssignedError struct{ msg string }

func (e *notAssignedError) Error() string { return e.msg }

// step runs one attempt of a task: append to the targets not yet acked
// (FastAck their checkpoints), then complete it once every target is acked.
func (ts *termState) step(t *task) outcome {
	log := ts.m.log.With("id", t.id, "message_type", t.msgType)
	st := ts.m.leader.State()
	bt, ok := st.BroadcastTask(t.id)
	if !ok || bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
		return outDone
	}
	ts.mu.Lock()
	t.assignSeen = st.AssignmentVersion()
	ts.mu.Unlock()
	if !fsm.AllAcked(bt) {
		if bt.State == logpb.BroadcastState_BROADCAST_REPLICATED {
			return ts.idle(t, bt) // replicated messages are acked by the nodes
		}
		targets := ts.toAppend(t, bt)
		if len(targets) > 0 {
			cps, err := ts.appendAll(st, bt, targets)
			if len(cps) > 0 {
				if bt.AckSyncUp {
					ts.mu.Lock()
					if t.appended == nil {
						t.appended = map[string]bool{}
					}
					for _, cp := range cps {
						t.appended[cp.Vchannel] = true
					}
					ts.mu.Unlock()
				} else if aerr := ts.ack(bt.Id, cps); aerr != nil {
					if ts.ctx.Err() == nil {
						log.Warn("recording broadcast acks failed", "error", aerr)
					}
					return outBackoff
				}
			}
			if err != nil {
				if ts.ctx.Err() == nil {
					log.Warn("broadcast append failed; retrying", "error", err)
				}
				return outBackoff
			}
		}
		bt, ok = ts.m.leader.State().BroadcastTask(t.id)
		if !ok || bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
			return outDone
		}
		if !fsm.AllAcked(bt) {
			if bt.AckSyncUp {
				return ts.idle(t, bt)
			}
			log.Warn("broadcast targets appended but not all acked", "acked", len(bt.Acked), "targets", len(bt.Vchannels))
			return outBackoff
		}
	}
	if !t.executed {
		t.executed = true
		ts.m.cfg.Metrics.observeExecution(t.msgType, time.Since(t.admitted).Seconds())
	}
	start := time.Now()
	res, err := ts.m.leader.Propose(ts.ctx, &logpb.CompleteBroadcast{BroadcastId: t.id}, "")
	if err != nil {
		if ts.ctx.Err() == nil {
			log.Warn("completing broadcast failed", "error", err)
		}
		return outBackoff
	}
	if r := res.Rejection; r != nil {
		if r.Code == logpb.RejectCode_REJECT_NOT_FOUND {
			return outDone
		}
		log.Warn("completing broadcast refused", "error", r.Message)
		return outBackoff
	}
	c := res.GetCompletion()
	if c.GetTombstoned() {
		ts.m.cfg.Metrics.observeCallback(t.msgType, time.Since(start).Seconds())
		return outDone
	}
	ts.m.cfg.Metrics.callbackFailed(t.msgType)
	log.Warn("broadcast ack callback refused; retrying", "error", c.GetCallbackError())
	return outBackoff
}

// idle parks a task until its remaining acks arrive.
func (ts *termState) idle(t *task, bt *logpb.BroadcastTask) outcome {
	ts.mu.Lock()
	t.ackedSeen = len(bt.Acked)
	ts.mu.Unlock()
	return outIdle
}

// toAppend lists the targets still to append: every unacked target, minus
// (for ack_sync_up tasks) the ones already appended in this leadership.
func (ts *termState) toAppend(t *task, bt *logpb.BroadcastTask) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for _, v := range bt.Vchannels {
		if _, ok := fsm.Acked(bt, v); ok {
			continue
		}
		if bt.AckSyncUp && t.appended[v] {
			continue
		}
		out = append(out, v)
	}
	return out
}

// appendAll appends bt's message to each target in parallel (bounded) and
// returns the checkpoints of those that succeeded and the first error.
func (ts *termState) appendAll(st *fsm.State, bt *logpb.BroadcastTask, targets []string) ([]*logpb.VChannelCheckpoint, error) {
	cfg := ts.m.cfg
	var (
		mu       sync.Mutex
		cps      []*logpb.VChannelCheckpoint
		firstErr error
		failed   int
		onAssign bool
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, cfg.AppendParallelism)
	for _, v := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func(v string) {
			defer wg.Done()
			defer func() { <-sem }()
			var cp *logpb.VChannelCheckpoint
			var err error
			if ts.finished(bt.Id) {
				err = errTaskFinishedHere
			} else {
				cp, err = ts.appendOne(st, bt, v)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
				if ownershipError(err) {
					onAssign = true
				}
				return
			}
			cps = append(cps, cp)
		}(v)
	}
	wg.Wait()
	if onAssign {
		ts.mu.Lock()
		if t := ts.tasks[bt.Id]; t != nil {
			t.onAssign = true
		}
		ts.mu.Unlock()
	}
	if firstErr != nil {
		return cps, fmt.Errorf("%d of %d appends failed, first: %w", failed, len(targets), firstErr)
	}
	return cps, nil
}

func (ts *termState) appendOne(st *fsm.State, bt *logpb.BroadcastTask, v string) (*logpb.VChannelCheckpoint, error) {
	pname := commands.PChannelOf(v)
	p, ok := st.PChannel(pname)
	if !ok {
		return nil, &notAssignedError{fmt.Sprintf("%s: pchannel %s does not exist", v, pname)}
	}
	if p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
		return nil, &notAssignedError{fmt.Sprintf("%s: pchannel %s is %s at term %d", v, pname, p.State, p.Term)}
	}
	if p.Mode != logpb.AccessMode_ACCESS_RW {
		return nil, &notAssignedError{fmt.Sprintf("%s: pchannel %s is read-only at term %d", v, pname, p.Term)}
	}
	n, ok := st.StreamingNode(p.NodeId)
	if !ok {
		return nil, &notAssignedError{fmt.Sprintf("%s: node %d of pchannel %s is unknown", v, p.NodeId, pname)}
	}
	ctx, cancel := context.WithTimeout(ts.ctx, ts.m.cfg.AppendTimeout)
	defer cancel()
	cp, err := ts.m.app.Append(ctx, n.Address, v, p.Term, bt.Payload, bt.Id, bt.AckSyncUp, ts.term)
	if err != nil {
		if code, ok := unrecoverableCode(err); ok {
			ts.m.cfg.Metrics.appendUnrecoverable(bt.MessageType, code)
		}
		return nil, fmt.Errorf("append to %s on node %d (%s) at term %d: %w", v, p.NodeId, n.Address, p.Term, err)
	}
	if cp == nil || cp.Term < 1 || cp.TimeTick == 0 {
		return nil, fmt.Errorf("append to %s on node %d: no usable checkpoint in the answer", v, p.NodeId)
	}
	cp.Vchannel = v
	return cp, nil
}

// ack commits FastAck checkpoints in one command.
func (ts *termState) ack(id uint64, cps []*logpb.VChannelCheckpoint) error {
	res, err := ts.m.leader.Propose(ts.ctx, &logpb.AckBroadcast{BroadcastId: id, Checkpoints: cps}, "")
	if err != nil {
		return err
	}
	if res.Rejection != nil {
		return rejectionError(res.Rejection)
	}
	return nil
}
