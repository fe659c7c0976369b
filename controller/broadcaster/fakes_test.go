package broadcaster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/testutil"
	"github.com/coordd/coordd/vocab"
)

// appliedOf returns the applied bodies of type T, in order.
func appliedOf[T proto.Message](l *controllertest.Leader) []T { return controllertest.AppliedOf[T](l) }

// taskOf reads broadcast id from the FSM and fails the test if it is absent.
func taskOf(t *testing.T, l *controllertest.Leader, id uint64) *logpb.BroadcastTask {
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
	leader *controllertest.Leader

	mu         sync.Mutex
	calls      []appendCall
	wal        map[string][]walEntry // vchannel → entries in append order
	offsets    map[string]uint64     // pchannel → next offset
	ts         uint64
	violations []string
	batches    []batchCall
	// onAppend, if set, runs (without the lock) before the append is
	// written; an error fails it. It may block.
	onAppend func(c appendCall) error
}

func newFakeAppender(l *controllertest.Leader) *fakeAppender {
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
	if p, ok := st.PChannel(vocab.PChannelOf(vchannel)); !ok || p.Term != term {
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
	p := vocab.PChannelOf(vchannel)
	a.ts++
	cp := &logpb.VChannelCheckpoint{Vchannel: vchannel, Term: term, Offset: a.offsets[p], TimeTick: 1000 + a.ts}
	a.offsets[p]++
	a.wal[vchannel] = append(a.wal[vchannel], walEntry{id: id, cp: cp})
	return proto.Clone(cp).(*logpb.VChannelCheckpoint), nil
}

// batchCall is one AppendBatch: the node and its items' VChannels.
type batchCall struct {
	Node      NodeTarget
	VChannels []string
}

// AppendBatch makes fakeAppender a BatchAppender, so the harness runs the
// broadcaster's production path (one call per node and step): it records
// the call and appends every item concurrently through Append, each with
// its own outcome.
func (a *fakeAppender) AppendBatch(ctx context.Context, node NodeTarget, items []AppendItem, payload []byte,
	id uint64, ackSyncUp bool, coordTerm uint64) []AppendResult {
	bc := batchCall{Node: node}
	for _, it := range items {
		bc.VChannels = append(bc.VChannels, it.VChannel)
	}
	a.mu.Lock()
	a.batches = append(a.batches, bc)
	a.mu.Unlock()
	out := make([]AppendResult, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Checkpoint, out[i].Err = a.Append(ctx, node, it.VChannel, it.PChannelTerm, payload, id, ackSyncUp, coordTerm)
		}()
	}
	wg.Wait()
	return out
}

func (a *fakeAppender) Batches() []batchCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]batchCall(nil), a.batches...)
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
	clock  *clockwork.FakeClock
	leader *controllertest.Leader
	app    *fakeAppender
	m      *Manager
	cfg    Config
	pch    []string
	cch    string
	node   uint64
	epoch  uint64 // the session epoch of node
	// deadline ends when the test has run for harnessDeadline; anything a
	// test blocks on by design (a held append) must also give up on it.
	deadline context.Context
}

// harnessDeadline bounds every harness test (scaled by
// COORDD_TEST_MULTIPLIER): each takes well under a second when it passes.
const harnessDeadline = 30 * time.Second

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	// Every harness test waits on the manager's goroutines; a bug that
	// wedges them must fail the test fast, not eat go test's timeout.
	deadline := testutil.Deadline(t, harnessDeadline)
	h := &harness{t: t, clock: controllertest.NewClock(), deadline: deadline}
	h.leader = controllertest.NewLeader(t, h.clock, testTerm)
	h.app = newFakeAppender(h.leader)
	for i := 0; i < 4; i++ {
		h.pch = append(h.pch, vocab.PChannelName(testPrefix, i))
	}
	h.leader.MustPropose(t, &logpb.InitStreaming{ClusterId: testClusterID, Pchannels: h.pch})
	h.cch = h.leader.State().CChannel()
	res := h.leader.MustPropose(t, &logpb.RegisterStreamingNode{Address: testNodeAddr, Incarnation: "inc-1"})
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
		Clock:                  h.clock,
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
	h.assignTo(p, h.node)
}

// assignTo moves pchannel p to node at term+1 (ASSIGNED).
func (h *harness) assignTo(p string, node uint64) {
	h.t.Helper()
	rec, _ := h.leader.State().PChannel(p)
	res := h.leader.MustPropose(h.t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: p, NodeId: node, ExpectedTerm: rec.Term}}})
	for _, a := range res.GetAssign().GetAssigned() {
		h.leader.MustPropose(h.t, &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{a}})
	}
}

// unassign moves pchannel p to ASSIGNING (a new term, not yet confirmed).
func (h *harness) unassign(p string) *logpb.PChannelTerm {
	h.t.Helper()
	// A second node to move the channel to.
	res := h.leader.MustPropose(h.t, &logpb.RegisterStreamingNode{Address: "10.0.0.9:1", Incarnation: "inc-9"})
	other := res.GetRegisterNode().GetNodeId()
	rec, _ := h.leader.State().PChannel(p)
	res = h.leader.MustPropose(h.t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: p, NodeId: other, ExpectedTerm: rec.Term}}})
	return res.GetAssign().GetAssigned()[0]
}

// run starts m.Run at term and returns a stop function that waits for it.
func (h *harness) run(m *Manager, term uint64) (stop func()) {
	stop = controllertest.RunRoutine(h.t, h.leader, m.Run, term)
	h.eventually("leadership published", func() bool { return m.current() != nil })
	return stop
}

// vch names a VChannel on pchannel index i for collection coll.
func (h *harness) vch(i int, coll int64) string { return vocab.VChannelName(h.pch[i], coll, 0) }

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
		res, err := broadcast(m, ctx, req)
		ch <- asyncResult{res, err}
	}()
	return ch
}

// clockStep is how far the fake clock moves between checks while a test
// waits on the manager: one sweep debounce, and at least the harness's
// longest default backoff in two steps.
const clockStep = sweepDelay

// eventually waits for cond while the manager works, advancing the fake
// clock by clockStep between checks so sweeps and backoffs come due.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	controllertest.AdvanceUntil(h.t, h.clock, clockStep, what, cond)
}

// never fails if cond becomes true while the fake clock is advanced by d
// in clockStep steps, the manager given a few real milliseconds to act on
// each step.
func (h *harness) never(what string, d time.Duration, cond func() bool) {
	h.t.Helper()
	for moved := time.Duration(0); moved <= d; moved += clockStep {
		testutil.Never(h.t, what, 3*time.Millisecond, cond)
		h.clock.Advance(clockStep)
	}
	testutil.Never(h.t, what, 3*time.Millisecond, cond)
}

// wait returns the result of an async broadcast, advancing the fake clock
// by clockStep while it waits.
func (h *harness) wait(ch <-chan asyncResult) asyncResult {
	h.t.Helper()
	var r asyncResult
	h.eventually("the broadcast to return", func() bool {
		select {
		case r = <-ch:
			return true
		default:
			return false
		}
	})
	return r
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
