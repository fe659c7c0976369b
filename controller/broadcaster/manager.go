package broadcaster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Leader is what the broadcaster needs from the raft node.
// raftnode.Node implements it.
type Leader interface {
	// State is the newest state applied on this node: immutable, never nil,
	// and possibly behind the leader's commit index. Guards that matter run
	// again inside Apply, so a decision read from it may be stale but never
	// unsafe.
	State() *fsm.State
	// StateChanged returns a channel closed when a state newer than the
	// current one is published. Take it before reading State, so a change
	// that lands in between is not missed.
	StateChanged() <-chan struct{}
	// Propose commits a command; see commands.Proposer for its error
	// contract. The term's work proposes through Run's routine proposer
	// instead, as decisions of the routine's term.
	commands.Proposer
	// EstablishedTerm is the raft term this node leads in once it has
	// committed LeaderEstablished for it, or 0 when it does not lead (or not
	// yet). It may drop to 0 at any moment; a non-zero value is a hint, not a
	// lease (docs/architecture.md#leader-routines).
	EstablishedTerm() uint64
}

// Config tunes the manager. Zero values take the defaults.
type Config struct {
	// Workers bounds the tasks executed at once, default 64. A task holds
	// its worker for a step (its appends and a raft round), so with 16 the
	// workers, not the appends or the log, bounded W5 at 64 clients: 110
	// broadcasts/s with 16, 204 with 64 (bench/RESULTS.md, issue 23).
	Workers                int
	BackoffInitial         time.Duration // append/callback retry, default 10ms
	BackoffMax             time.Duration // default 10s
	TombstoneMaxCount      int           // default 8192
	TombstoneMaxLifetime   time.Duration // default 24h
	TombstoneCheckInterval time.Duration // default 5m
	// AppendTimeout bounds one Append or AppendBatch call, default 10s.
	AppendTimeout time.Duration
	// AppendParallelism bounds the concurrent append calls of one task
	// step (single Appends, or AppendBatch calls: one per node), default 32.
	AppendParallelism int
	// AckSyncUpResend: an ack_sync_up task whose appended targets have not
	// all been acked after this long re-appends them (the node dedups and
	// acks again), default 30s.
	AckSyncUpResend time.Duration
	Logger          hclog.Logger
	// Clock reads the time and runs every timer (retries, backoffs, the
	// sweep and the tombstone check); default the real clock. Tests pass a
	// fake and advance it. Latency metrics use the real clock.
	Clock   clockwork.Clock
	Metrics *Metrics // optional
	// UnsafeReleaseKeysAtCreate breaks the broadcaster on purpose (tests of
	// the tests only): a task's resource keys are released as soon as it
	// is created, so a conflicting task can overtake it in a WAL, and each
	// append waits a random delay of up to 20ms so it does (unsafe_order.go).
	UnsafeReleaseKeysAtCreate bool
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = 64
	}
	if c.BackoffInitial <= 0 {
		c.BackoffInitial = 10 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 10 * time.Second
	}
	if c.TombstoneMaxCount <= 0 {
		c.TombstoneMaxCount = 8192
	}
	if c.TombstoneMaxLifetime <= 0 {
		c.TombstoneMaxLifetime = 24 * time.Hour
	}
	if c.TombstoneCheckInterval <= 0 {
		c.TombstoneCheckInterval = 5 * time.Minute
	}
	if c.AppendTimeout <= 0 {
		c.AppendTimeout = 10 * time.Second
	}
	if c.AppendParallelism <= 0 {
		c.AppendParallelism = 32
	}
	if c.AckSyncUpResend <= 0 {
		c.AckSyncUpResend = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	return c
}

// Manager is the broadcaster's leader side (docs/semantics.md#broadcaster):
// the resource-key lock table, the append scheduler, the ack-callback driver
// and tombstone GC. Everything it keeps is leader memory rebuilt from the FSM
// by Run; the FSM holds the tasks and runs every guard.
type Manager struct {
	leader Leader
	app    Appender
	cfg    Config
	log    hclog.Logger

	mu      sync.Mutex
	cur     *termState    // the ready leadership, nil otherwise
	ready   chan struct{} // closed and replaced whenever cur changes
	closed  bool
	closeCh chan struct{}
	runs    sync.WaitGroup

	// Calls blocked waiting for a leadership (await), for a task's end
	// (waitDone) and for the tasks they were ordered behind
	// (awaitPredecessors), so tests know a call is parked before they move
	// on.
	awaiting, waitingDone, awaitingPredecessors atomic.Int32
}

// New builds a manager. Run is its leader routine.
func New(leader Leader, appender Appender, cfg Config) (*Manager, error) {
	if leader == nil {
		return nil, errors.New("broadcaster: a leader is required")
	}
	if appender == nil {
		return nil, errors.New("broadcaster: an appender is required")
	}
	cfg = cfg.withDefaults()
	if cfg.TombstoneMaxCount > math.MaxUint32 {
		return nil, fmt.Errorf("broadcaster: tombstone max count %d is too large", cfg.TombstoneMaxCount)
	}
	if cfg.BackoffMax < cfg.BackoffInitial {
		return nil, fmt.Errorf("broadcaster: backoff max %v is below backoff initial %v", cfg.BackoffMax, cfg.BackoffInitial)
	}
	cfg.Metrics.SetStateSource(leader.State)
	return &Manager{leader: leader, app: appender, cfg: cfg, log: cfg.Logger,
		ready: make(chan struct{}), closeCh: make(chan struct{})}, nil
}

// Close stops the current leadership's work, waits for Run to return and
// closes the appender if it can be closed. Broadcast calls waiting for a
// task keep watching the FSM until their context ends.
func (m *Manager) Close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.closeCh)
	}
	cur := m.cur
	m.mu.Unlock()
	if cur != nil {
		cur.cancel()
	}
	m.runs.Wait()
	if c, ok := m.app.(interface{ Close() }); ok {
		c.Close()
	}
}

// Run is the leader routine for one established term: it re-locks every
// PENDING task of the FSM before admitting any new Broadcast, schedules
// them, and runs the tombstone GC until ctx ends; then it stops its workers
// and drops all leader memory. The term's work proposes through the
// routine's proposer p, as decisions of term.
func (m *Manager) Run(ctx context.Context, term uint64, p commands.Proposer) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.runs.Add(1)
	m.mu.Unlock()
	defer m.runs.Done()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ts := newTermState(m, runCtx, cancel, term, p)
	recovered := ts.rebuild()
	ts.start()
	for _, t := range recovered {
		ts.enqueue(t)
	}
	if !m.publish(ts) {
		ts.stop()
		return
	}
	m.log.Info("broadcaster running", "term", term, "recovered_tasks", len(recovered))
	ts.loop(m.closeCh)
	m.unpublish(ts)
	ts.stop()
	m.log.Info("broadcaster stopped", "term", term)
}

func (m *Manager) publish(ts *termState) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.cur = ts
	close(m.ready)
	m.ready = make(chan struct{})
	return true
}

func (m *Manager) unpublish(ts *termState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == ts {
		m.cur = nil
		close(m.ready)
		m.ready = make(chan struct{})
	}
}

func (m *Manager) current() *termState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// await returns the ready leadership of the current established term,
// waiting (ctx-bounded) while Run rebuilds it.
func (m *Manager) await(ctx context.Context) (*termState, error) {
	poll := m.cfg.Clock.NewTimer(time.Hour)
	defer poll.Stop()
	for {
		term := m.leader.EstablishedTerm()
		if term == 0 {
			return nil, errNotLeader
		}
		m.mu.Lock()
		cur, ready, closed := m.cur, m.ready, m.closed
		m.mu.Unlock()
		if closed {
			return nil, errNotLeader
		}
		if cur != nil && cur.term == term && cur.ctx.Err() == nil {
			return cur, nil
		}
		poll.Reset(10 * time.Millisecond) // EstablishedTerm changes without a signal
		m.awaiting.Add(1)
		select {
		case <-ctx.Done():
			m.awaiting.Add(-1)
			return nil, fmt.Errorf("broadcaster is recovering the tasks of term %d: %w", term, ctx.Err())
		case <-ready:
		case <-poll.Chan():
		}
		m.awaiting.Add(-1)
	}
}

// Broadcast commits a task for req, has it appended to every target and
// waits until its callback has run and it is a TOMBSTONE. With no targets
// in req the manager chooses them (chooseTargets); the CChannel is added
// when missing. Targets are chosen and checked once the resource keys are
// held and the idempotency key is known to be new, so a call that fails
// or times out before the task exists changes nothing. A ctx end returns
// ctx's error; the task goes on. With an idempotency key already known in
// its scope, no task is created: the call waits for the original and
// returns it with Duplicated set.
//
// The request's shape was checked once, by Check (or NewRequest), on the
// member that served the call; the state is checked once, when the
// command is built (prepare); Apply checks both again as the guard.
func (m *Manager) Broadcast(ctx context.Context, checked Checked) (Result, error) {
	start := time.Now()
	if !checked.ok {
		return Result{}, vocab.Errorf(commands.ErrInvalid, "a broadcast request not made by broadcaster.Check")
	}
	req := checked.req
	if m.leader.EstablishedTerm() == 0 {
		return Result{}, errNotLeader
	}
	req = withTypeKeys(req)
	if id, ok := m.original(req); ok {
		return m.waitDone(ctx, req.MessageType, id, true, 0, start)
	}
	if !m.leader.State().IsPrimary() {
		return Result{}, ErrNotPrimary // nothing to wait for
	}
	ts, err := m.await(ctx)
	if err != nil {
		return Result{}, err
	}
	keys := commands.NormalizeResourceKeys(req.ResourceKeys)
	lockStart := time.Now()
	lockCtx, cancelLock := lockWaitContext(ctx)
	defer cancelLock()
	guard, wait, err := ts.locks.lock(lockCtx, keys, func(k *logpb.ResourceKey, d time.Duration) {
		m.cfg.Metrics.observeLock(k, d.Seconds())
	})
	if err != nil {
		return Result{LockWait: wait}, err
	}
	// From the state req is decided on until its create's outcome is
	// known, no other CreateCollection of its collection is decided.
	admitted, err := ts.admissions.admit(lockCtx, req)
	if err != nil {
		guard.release()
		return Result{LockWait: time.Since(lockStart)}, err
	}
	requestID := req.RequestID
	if requestID == "" {
		requestID = newRequestID()
	}
	cmd, original, err := m.decide(lockCtx, ts, checked, requestID, guard, lockStart)
	switch {
	case err != nil:
		admitted()
		guard.release()
		return Result{LockWait: time.Since(lockStart)}, err
	case original != 0:
		admitted()
		guard.release()
		return m.waitDone(ctx, req.MessageType, original, true, wait, start)
	}
	id, dup, err := ts.create(ctx, lockCtx, cmd, guard, admitted)
	if err != nil {
		return Result{BroadcastID: id, LockWait: wait}, err
	}
	return m.waitDone(ctx, req.MessageType, id, dup, wait, start)
}

// decide builds the CreateBroadcast command for req once its keys are
// held: on the state as it is now, or, while conflicting tasks are still
// finishing on the keys (handoff.go), ordered behind them when the request
// does not depend on the state they leave, and after them otherwise. A
// non-zero original (and no command) means req's idempotency key or
// request ID already names that task.
func (m *Manager) decide(lockCtx context.Context, ts *termState, c Checked, requestID string, guard *lockGuard, lockStart time.Time) (cmd commands.Command, original uint64, err error) {
	req := withTypeKeys(c.req)
	for {
		behind := guard.pending()
		if len(behind) > 0 && !pipelinable(req, behind) {
			if err := ts.awaitPredecessors(lockCtx, behind, lockStart); err != nil {
				return commands.Command{}, 0, err
			}
			continue
		}
		if id, ok := m.original(req); ok {
			return commands.Command{}, id, nil
		}
		var after []uint64
		if len(behind) > 0 {
			after = predecessorIDs(behind)
		}
		cmd, err := prepare(m.leader.State(), c, after, requestID)
		if err != nil && len(behind) > 0 {
			// Perhaps refused only on the state before their callbacks.
			if err := ts.awaitPredecessors(lockCtx, behind, lockStart); err != nil {
				return commands.Command{}, 0, err
			}
			continue
		}
		if err != nil {
			return commands.Command{}, 0, err
		}
		if len(after) > 0 {
			m.cfg.Metrics.createPipelined()
		}
		return cmd, 0, nil
	}
}

// maxLockMargin bounds how much earlier than its caller's deadline a lock
// wait gives up.
const maxLockMargin = 500 * time.Millisecond

// lockWaitContext ends a lock wait a little before ctx's deadline (a tenth
// of the time left, at most maxLockMargin), so the LockTimeoutError naming
// the key reaches the caller, through a forwarding member and a client
// with the same deadline, before the caller's own deadline ends the call
// with a bare "context deadline exceeded".
func lockWaitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(time.Until(dl)/10, maxLockMargin)
	return context.WithDeadline(ctx, dl.Add(-margin))
}

// original returns the task that already holds req's idempotency scope,
// or the task a CreateBroadcast with req's request ID created (a retry of
// a call whose outcome was unknown: its targets, chosen anew, could differ
// from the first's, so it must not be decided again).
func (m *Manager) original(req Request) (uint64, bool) {
	st := m.leader.State()
	if req.IdempotencyKey != "" {
		if t, ok := st.BroadcastByIdempotencyKey(req.MessageType, req.IdempotencyKey); ok {
			return t.Id, true
		}
	}
	if req.RequestID != "" {
		res, ok := st.LookupRequest(req.RequestID)
		if c := res.GetBroadcast(); ok && c != nil {
			// Another request under the ID goes on to Apply, which
			// refuses it by its fingerprint. A tombstone keeps no payload
			// to compare; a pruned task nothing (waitDone says so).
			t, ok := st.BroadcastTask(c.BroadcastId)
			if !ok || sameRequest(t, req) {
				return c.BroadcastId, true
			}
		}
	}
	return 0, false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// waitDone waits until task id is a TOMBSTONE in the FSM and builds the
// result from its persisted checkpoints.
func (m *Manager) waitDone(ctx context.Context, msgType string, id uint64, dup bool, wait time.Duration, start time.Time) (Result, error) {
	res := Result{BroadcastID: id, Duplicated: dup, LockWait: wait}
	for {
		changed := m.leader.StateChanged()
		t, ok := m.leader.State().BroadcastTask(id)
		if !ok {
			return res, fmt.Errorf("broadcast %d: %w (its tombstone was pruned)", id, ErrTaskNotFound)
		}
		if t.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
			res.Checkpoints = make([]*logpb.VChannelCheckpoint, len(t.Acked))
			for i, cp := range t.Acked {
				res.Checkpoints[i] = proto.Clone(cp).(*logpb.VChannelCheckpoint)
			}
			if t.AbandonedReason != "" {
				return res, vocab.Errorf(ErrAbandoned, "broadcast %d: %s", id, t.AbandonedReason)
			}
			if !dup {
				m.cfg.Metrics.observeBroadcast(msgType, time.Since(start).Seconds())
			}
			return res, nil
		}
		m.waitingDone.Add(1)
		select {
		case <-ctx.Done():
			m.waitingDone.Add(-1)
			return res, ctx.Err()
		case <-changed:
		}
		m.waitingDone.Add(-1)
	}
}

// sameRequest reports whether task t could have been created for req:
// the same message type, resource keys and ack mode, and the same payload
// while t keeps it (a tombstone does not).
func sameRequest(t *logpb.BroadcastTask, req Request) bool {
	if t.MessageType != req.MessageType || t.AckSyncUp != req.AckSyncUp ||
		(t.Payload != nil && !bytes.Equal(t.Payload, req.Payload)) {
		return false
	}
	keys := commands.NormalizeResourceKeys(req.ResourceKeys)
	if len(keys) != len(t.ResourceKeys) {
		return false
	}
	for i, k := range keys {
		if !proto.Equal(k, t.ResourceKeys[i]) {
			return false
		}
	}
	return true
}
