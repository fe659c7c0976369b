package balancer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer/policy"
	"github.com/coordd/coordd/controller/controllertest"
)

// appliedOf returns the applied bodies of type T, in order.
func appliedOf[T proto.Message](l *controllertest.Leader) []T { return controllertest.AppliedOf[T](l) }

// ---- fake health -------------------------------------------------------------

type fakeHealth struct {
	mu      sync.Mutex
	healthy map[uint64]bool
	changed chan struct{}
	// calls counts Healthy calls: Decide asks once per UP node, so it
	// shows whether a decision ran.
	calls int
	// onHealthy, if set, runs once (then is cleared) at the next Healthy
	// call, after the answer was read and without the lock: a hook to
	// change things while a layout is being built.
	onHealthy func()
}

func newFakeHealth() *fakeHealth {
	return &fakeHealth{healthy: map[uint64]bool{}, changed: make(chan struct{})}
}

func (h *fakeHealth) Healthy(node uint64) bool {
	h.mu.Lock()
	healthy := h.healthy[node]
	h.calls++
	hook := h.onHealthy
	h.onHealthy = nil
	h.mu.Unlock()
	if hook != nil {
		hook()
	}
	return healthy
}

// Calls is the number of Healthy calls so far.
func (h *fakeHealth) Calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func (h *fakeHealth) setOnHealthy(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onHealthy = f
}

func (h *fakeHealth) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

func (h *fakeHealth) Set(node uint64, healthy bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.healthy[node] = healthy
	close(h.changed)
	h.changed = make(chan struct{})
}

// ---- fake streaming client -----------------------------------------------------

type rpcCall struct {
	Op        string // "assign" or "remove"
	Addr      string
	PChannel  string
	Term      int64
	Mode      logpb.AccessMode
	CoordTerm uint64
}

func (c rpcCall) String() string {
	return fmt.Sprintf("%s(%s, %s@%d, coord %d)", c.Op, c.Addr, c.PChannel, c.Term, c.CoordTerm)
}

type fakeClient struct {
	mu      sync.Mutex
	calls   []rpcCall
	targets []NodeTarget // the target of each call, in the same order
	// onCall, if set, runs for every call (after it is recorded) and its
	// result is the call's result.
	onCall func(rpcCall) error
	closed bool
}

func (c *fakeClient) do(node NodeTarget, call rpcCall) error {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.targets = append(c.targets, node)
	f := c.onCall
	c.mu.Unlock()
	if f != nil {
		return f(call)
	}
	return nil
}

func (c *fakeClient) Assign(ctx context.Context, node NodeTarget, pchannel string, term int64, mode logpb.AccessMode, coordTerm uint64) error {
	return c.do(node, rpcCall{Op: "assign", Addr: node.Addr, PChannel: pchannel, Term: term, Mode: mode, CoordTerm: coordTerm})
}

func (c *fakeClient) Remove(ctx context.Context, node NodeTarget, pchannel string, term int64, coordTerm uint64) error {
	return c.do(node, rpcCall{Op: "remove", Addr: node.Addr, PChannel: pchannel, Term: term, CoordTerm: coordTerm})
}

func (c *fakeClient) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

func (c *fakeClient) setOnCall(f func(rpcCall) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onCall = f
}

// Calls returns the calls so far, in order.
func (c *fakeClient) Calls() []rpcCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]rpcCall(nil), c.calls...)
}

// Targets returns the target of every call so far, in order.
func (c *fakeClient) Targets() []NodeTarget {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]NodeTarget(nil), c.targets...)
}

// Reset forgets the recorded calls.
func (c *fakeClient) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls, c.targets = nil, nil
}

// callsFor filters calls of one pchannel (their order is meaningful: one
// goroutine applies a channel).
func callsFor(calls []rpcCall, pchannel string) []rpcCall {
	var out []rpcCall
	for _, c := range calls {
		if c.PChannel == pchannel {
			out = append(out, c)
		}
	}
	return out
}

// ---- harness ---------------------------------------------------------------------

const (
	testPrefix    = "test-dml"
	testClusterID = "test-cluster"
	testTerm      = 7
)

type harness struct {
	t      *testing.T
	clock  *clockwork.FakeClock
	leader *controllertest.Leader
	health *fakeHealth
	client *fakeClient
	b      *Balancer
	cfg    Config
	// runFrom is how many commands were applied when runBalancer started.
	runFrom int
}

func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, clock: controllertest.NewClock(), health: newFakeHealth(), client: &fakeClient{}}
	h.leader = controllertest.NewLeader(t, h.clock, testTerm)
	h.cfg = Config{
		ClusterID:       testClusterID,
		PChannelPrefix:  testPrefix,
		PChannels:       16,
		Interval:        time.Hour, // rounds in Run tests come from triggers
		BackoffInitial:  5 * time.Millisecond,
		BackoffMax:      20 * time.Millisecond,
		RPCTimeout:      time.Second,
		Policy:          policy.DefaultConfig(),
		Clock:           h.clock,
		StreamingClient: h.client,
	}
	if mutate != nil {
		mutate(&h.cfg)
	}
	b, err := New(h.leader, h.health, h.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.b = b
	return h
}

// addNode registers a streaming node and marks it healthy.
func (h *harness) addNode(addr string) uint64 {
	h.t.Helper()
	res := h.leader.MustPropose(h.t, &logpb.RegisterStreamingNode{Address: addr, Incarnation: "inc-" + addr})
	id := res.GetRegisterNode().GetNodeId()
	h.health.Set(id, true)
	return id
}

func (h *harness) node(id uint64) *logpb.StreamingNodeRecord {
	h.t.Helper()
	n, ok := h.leader.State().StreamingNode(id)
	if !ok {
		h.t.Fatalf("node %d not in the FSM", id)
	}
	return n
}

func (h *harness) pchannel(name string) *logpb.PChannelRecord {
	h.t.Helper()
	p, ok := h.leader.State().PChannel(name)
	if !ok {
		h.t.Fatalf("pchannel %s not in the FSM", name)
	}
	return p
}

func (h *harness) bootstrap() {
	h.t.Helper()
	if err := h.b.ensurePChannels(context.Background(), h.b.leader); err != nil {
		h.t.Fatalf("ensurePChannels: %v", err)
	}
}

// round runs one round on a fresh snapshot, as Run does.
func (h *harness) round() (bool, error) {
	plan, err := h.b.decide(h.leader.State(), "")
	if err != nil {
		return false, err
	}
	// As in Run: the round decides in the routine's term.
	return h.b.execute(context.Background(), commands.Fenced(h.b.leader, testTerm), plan)
}

// settle runs rounds until one changes nothing; every round must succeed.
func (h *harness) settle() {
	h.t.Helper()
	for i := 0; i < 20; i++ {
		changed, err := h.round()
		if err != nil {
			h.t.Fatalf("round %d: %v", i, err)
		}
		if !changed {
			return
		}
	}
	h.t.Fatalf("rounds did not settle")
}

// placement maps node ID to its ASSIGNED channels' count and fails the test
// if any channel is not ASSIGNED or holds histories.
func (h *harness) placement() map[uint64]int {
	h.t.Helper()
	out := map[uint64]int{}
	for _, p := range h.leader.State().PChannels() {
		if p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
			h.t.Fatalf("%s is %s at term %d (last error %q), want ASSIGNED", p.Name, p.State, p.Term, p.LastError)
		}
		if len(p.Histories) != 0 {
			h.t.Fatalf("%s is ASSIGNED with histories %v", p.Name, p.Histories)
		}
		out[p.NodeId]++
	}
	return out
}

// channelsOn lists the channels whose current node is id.
func (h *harness) channelsOn(id uint64) []string {
	var out []string
	for _, p := range h.leader.State().PChannels() {
		if p.NodeId == id {
			out = append(out, p.Name)
		}
	}
	return out
}

// checkRoutineDecisions fails the test unless every command of the
// balancer's own kinds applied since runBalancer was proposed through
// Run's routine proposer: as a decision of testTerm, marked as a
// routine's. It returns how many it checked.
func (h *harness) checkRoutineDecisions() int {
	h.t.Helper()
	applied, terms, marks := h.leader.Applied(), h.leader.DecisionTerms(), h.leader.RoutineMarks()
	n := 0
	for i := h.runFrom; i < len(applied); i++ {
		b := applied[i]
		switch b.(type) {
		case *logpb.InitStreaming, *logpb.AddPChannels, *logpb.AssignPChannels, *logpb.AssignPChannelsDone, *logpb.RecordAssignFailure:
			n++
			if terms[i] != testTerm || !marks[i] {
				h.t.Errorf("%T proposed with decision term %d, routine mark %v; want term %d and the mark", b, terms[i], marks[i], testTerm)
			}
		}
	}
	return n
}

// runBalancer starts Run and returns a stop function that waits for it.
func (h *harness) runBalancer() (stop func()) {
	h.runFrom = len(h.leader.Applied())
	return controllertest.RunRoutine(h.t, h.leader, h.b.Run, testTerm)
}

// eventually waits for cond while Run works, advancing the fake clock by
// the longest backoff between checks so retries come due.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	controllertest.AdvanceUntil(h.t, h.clock, h.cfg.BackoffMax, what, cond)
}
