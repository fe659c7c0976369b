package broadcaster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// ---- fake clock ----------------------------------------------------------------

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// ---- fake leader: a real FSM state behind a Propose that applies at once ------

var errFakeNotLeader = errors.New("fake: not the leader")

type fakeLeader struct {
	clock       *fakeClock
	established atomic.Uint64

	mu      sync.Mutex
	st      *fsm.State
	index   uint64
	changed chan struct{}
	applied []proto.Message
	// hook, if set, runs before every proposal (outside the lock); an
	// error fails the proposal without applying it. It may block.
	hook func(body proto.Message) error
	// afterApply, if set, runs after a proposal was applied; an error is
	// returned instead of the result (an "outcome unknown" answer).
	afterApply func(body proto.Message) error
}

func (l *fakeLeader) setAfterApply(f func(body proto.Message) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.afterApply = f
}

func newFakeLeader(t *testing.T, clock *fakeClock, term uint64) *fakeLeader {
	t.Helper()
	l := &fakeLeader{clock: clock, st: fsm.New(), changed: make(chan struct{})}
	l.establish(t, term)
	return l
}

// establish commits LeaderEstablished for term and reports it established.
func (l *fakeLeader) establish(t *testing.T, term uint64) {
	t.Helper()
	l.established.Store(term)
	l.mustPropose(t, &logpb.LeaderEstablished{Term: term, LeaderId: fmt.Sprintf("coord-%d", term)})
}

func (l *fakeLeader) State() *fsm.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

func (l *fakeLeader) StateChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *fakeLeader) EstablishedTerm() uint64 { return l.established.Load() }

func (l *fakeLeader) setHook(f func(body proto.Message) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hook = f
}

func (l *fakeLeader) Propose(ctx context.Context, c commands.Command) (*logpb.Result, error) {
	if !c.Checked() {
		return nil, fmt.Errorf("%w: %s was not built by commands.New", commands.ErrInvalid, c.Type)
	}
	body := c.Body
	if c.LeaderTerm == 0 {
		c.LeaderTerm = commands.DecisionTerm(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	hook := l.hook
	l.mu.Unlock()
	if hook != nil {
		if err := hook(body); err != nil {
			return nil, err
		}
	}
	if l.established.Load() == 0 {
		return nil, errFakeNotLeader
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.ProposedAtUnixMs = l.clock.Now().UnixMilli()
	if c.LeaderTerm == 0 {
		c.LeaderTerm = l.established.Load()
	}
	next, results, err := l.st.ApplyCommands(l.index+1, c)
	if err != nil {
		return nil, err
	}
	if err := next.CheckInvariants(); err != nil {
		panic(fmt.Sprintf("invariant broken after %T: %v", body, err))
	}
	l.index++
	l.st = next
	l.applied = append(l.applied, proto.Clone(body))
	close(l.changed)
	l.changed = make(chan struct{})
	if l.afterApply != nil {
		if err := l.afterApply(body); err != nil {
			return nil, err
		}
	}
	return results[0], nil
}

func (l *fakeLeader) mustPropose(t *testing.T, body proto.Message) *logpb.Result {
	t.Helper()
	res, err := commands.Propose(context.Background(), l, body, "")
	if err != nil {
		t.Fatalf("propose %T: %v", body, err)
	}
	if res.Rejection != nil {
		t.Fatalf("propose %T rejected: %v", body, res.Rejection)
	}
	return res
}

// appliedOf returns the applied bodies of type T, in order.
func appliedOf[T proto.Message](l *fakeLeader) []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []T
	for _, b := range l.applied {
		if v, ok := b.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func (l *fakeLeader) task(t *testing.T, id uint64) *logpb.BroadcastTask {
	t.Helper()
	bt, ok := l.State().BroadcastTask(id)
	if !ok {
		t.Fatalf("broadcast %d not in the FSM", id)
	}
	return bt
}

// ---- fake appender: a per-VChannel WAL with (broadcast ID, vchannel) dedup --------

type appendCall struct {
	Addr      string
	VChannel  string
	Term      int64
	ID        uint64
	AckSyncUp bool
	CoordTerm uint64
}

type walEntry struct {
	id uint64
	cp *logpb.VChannelCheckpoint
}

type fakeAppender struct {
	leader *fakeLeader

	mu         sync.Mutex
	calls      []appendCall
	wal        map[string][]walEntry // vchannel → entries in append order
	offsets    map[string]uint64     // pchannel → next offset
	ts         uint64
	violations []string
	// onAppend, if set, runs (without the lock) before the append is
	// written; an error fails it. It may block.
	onAppend func(c appendCall) error
}

func newFakeAppender(l *fakeLeader) *fakeAppender {
	return &fakeAppender{leader: l, wal: map[string][]walEntry{}, offsets: map[string]uint64{}}
}

func (a *fakeAppender) setOnAppend(f func(c appendCall) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.onAppend = f
}

func (a *fakeAppender) violate(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.violations = append(a.violations, fmt.Sprintf(format, args...))
}

func (a *fakeAppender) Append(ctx context.Context, node NodeTarget, vchannel string, term int64, payload []byte,
	id uint64, ackSyncUp bool, coordTerm uint64) (*logpb.VChannelCheckpoint, error) {
	addr := node.Addr
	c := appendCall{Addr: addr, VChannel: vchannel, Term: term, ID: id, AckSyncUp: ackSyncUp, CoordTerm: coordTerm}
	// Persist before append (docs/semantics.md#broadcast-lifecycle): the task
	// is PENDING already.
	st := a.leader.State()
	if bt, ok := st.BroadcastTask(id); !ok {
		a.violate("append of broadcast %d to %s before the task exists", id, vchannel)
	} else if bt.State != logpb.BroadcastState_BROADCAST_PENDING && bt.AbandonedReason == "" {
		// (An append racing with an operator's Abandon is expected.)
		a.violate("append of broadcast %d to %s while it is %s", id, vchannel, bt.State)
	}
	// The call goes to the owner at its current term.
	if p, ok := st.PChannel(commands.PChannelOf(vchannel)); !ok || p.Term != term {
		a.violate("append to %s at term %d, FSM says %v", vchannel, term, p)
	} else if n, ok := st.StreamingNode(p.NodeId); !ok || n.Address != addr || n.Id != node.ID || n.Epoch != node.Epoch {
		a.violate("append to %s sent to %+v, owner is node %d", vchannel, node, p.NodeId)
	}
	if coordTerm == 0 || coordTerm != a.leader.EstablishedTerm() {
		a.violate("append to %s with coord term %d, leader is at %d", vchannel, coordTerm, a.leader.EstablishedTerm())
	}
	a.mu.Lock()
	a.calls = append(a.calls, c)
	f := a.onAppend
	a.mu.Unlock()
	if f != nil {
		if err := f(c); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.wal[vchannel] {
		if e.id == id {
			return proto.Clone(e.cp).(*logpb.VChannelCheckpoint), nil // dedup
		}
	}
	p := commands.PChannelOf(vchannel)
	a.ts++
	cp := &logpb.VChannelCheckpoint{Vchannel: vchannel, Term: term, Offset: a.offsets[p], TimeTick: 1000 + a.ts}
	a.offsets[p]++
	a.wal[vchannel] = append(a.wal[vchannel], walEntry{id: id, cp: cp})
	return proto.Clone(cp).(*logpb.VChannelCheckpoint), nil
}

// walIDs returns the broadcast IDs in vchannel's WAL, in order.
func (a *fakeAppender) walIDs(vchannel string) []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []uint64
	for _, e := range a.wal[vchannel] {
		out = append(out, e.id)
	}
	return out
}

func (a *fakeAppender) walEntry(vchannel string, id uint64) (*logpb.VChannelCheckpoint, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.wal[vchannel] {
		if e.id == id {
			return e.cp, true
		}
	}
	return nil, false
}

func (a *fakeAppender) Calls() []appendCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]appendCall(nil), a.calls...)
}

func (a *fakeAppender) check(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range a.violations {
		t.Errorf("appender: %s", v)
	}
}

// ---- harness ---------------------------------------------------------------------

const (
	testPrefix    = "test-dml"
	testClusterID = "test-cluster"
	testTerm      = 7
	testNodeAddr  = "10.0.0.1:22222"
)

type harness struct {
	t      *testing.T
	clock  *fakeClock
	leader *fakeLeader
	app    *fakeAppender
	m      *Manager
	cfg    Config
	pch    []string
	cch    string
	node   uint64
	epoch  uint64 // the session epoch of node
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: newFakeClock()}
	h.leader = newFakeLeader(t, h.clock, testTerm)
	h.app = newFakeAppender(h.leader)
	for i := 0; i < 4; i++ {
		h.pch = append(h.pch, commands.PChannelName(testPrefix, i))
	}
	h.leader.mustPropose(t, &logpb.InitStreaming{ClusterId: testClusterID, Pchannels: h.pch})
	h.cch = h.leader.State().CChannel()
	res := h.leader.mustPropose(t, &logpb.RegisterStreamingNode{Address: testNodeAddr, Incarnation: "inc-1"})
	h.node, h.epoch = res.GetRegisterNode().GetNodeId(), res.GetRegisterNode().GetEpoch()
	for _, p := range h.pch {
		h.assign(p)
	}
	h.cfg = Config{
		Workers:                8,
		BackoffInitial:         time.Millisecond,
		BackoffMax:             20 * time.Millisecond,
		TombstoneCheckInterval: time.Hour,
		AckSyncUpResend:        time.Hour,
		Now:                    h.clock.Now,
		Logger:                 hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: testWriter{t}}),
	}
	if mutate != nil {
		mutate(&h.cfg)
	}
	h.m = h.newManager()
	t.Cleanup(func() { h.app.check(t) })
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}

func (h *harness) newManager() *Manager {
	h.t.Helper()
	m, err := New(h.leader, h.app, h.cfg)
	if err != nil {
		h.t.Fatalf("New: %v", err)
	}
	h.t.Cleanup(m.Close)
	return m
}

// assign moves pchannel p to the harness node at term+1 (ASSIGNED).
func (h *harness) assign(p string) {
	h.t.Helper()
	rec, _ := h.leader.State().PChannel(p)
	res := h.leader.mustPropose(h.t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: p, NodeId: h.node, ExpectedTerm: rec.Term}}})
	for _, a := range res.GetAssign().GetAssigned() {
		h.leader.mustPropose(h.t, &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{a}})
	}
}

// unassign moves pchannel p to ASSIGNING (a new term, not yet confirmed).
func (h *harness) unassign(p string) *logpb.PChannelTerm {
	h.t.Helper()
	// A second node to move the channel to.
	res := h.leader.mustPropose(h.t, &logpb.RegisterStreamingNode{Address: "10.0.0.9:1", Incarnation: "inc-9"})
	other := res.GetRegisterNode().GetNodeId()
	rec, _ := h.leader.State().PChannel(p)
	res = h.leader.mustPropose(h.t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: p, NodeId: other, ExpectedTerm: rec.Term}}})
	return res.GetAssign().GetAssigned()[0]
}

// run starts m.Run at term and returns a stop function that waits for it.
func (h *harness) run(m *Manager, term uint64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, term)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				h.t.Errorf("Run did not return after cancel")
			}
		})
	}
	h.t.Cleanup(stop)
	eventually(h.t, "leadership published", func() bool { return m.current() != nil })
	return stop
}

// vch names a VChannel on pchannel index i for collection coll.
func (h *harness) vch(i int, coll int64) string { return commands.VChannelName(h.pch[i], coll, 0) }

func collKey(db, coll string, shared bool) *logpb.ResourceKey {
	return &logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: db + ":" + coll, Shared: shared}
}

func dbKey(db string) *logpb.ResourceKey {
	return &logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_DB_NAME, Key: db, Shared: true}
}

// broadcastAsync runs Broadcast in a goroutine.
type asyncResult struct {
	res Result
	err error
}

func broadcastAsync(ctx context.Context, m *Manager, req Request) <-chan asyncResult {
	ch := make(chan asyncResult, 1)
	go func() {
		res, err := m.Broadcast(ctx, req)
		ch <- asyncResult{res, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan asyncResult) asyncResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("broadcast did not return")
	}
	return asyncResult{}
}

// eventually polls cond every 2ms for at most 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// never fails if cond becomes true within d.
func never(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			t.Fatalf("unexpectedly: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// locksOf returns the current leadership's lock table (nil if none).
func locksOf(m *Manager) *lockTable {
	if ts := m.current(); ts != nil {
		return ts.locks
	}
	return nil
}
