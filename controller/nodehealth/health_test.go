package nodehealth

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// ---- fakes -------------------------------------------------------------------

// fakeClock counts Now calls so a test can wait for the tracker's ticks
// (each tick reads the clock once) after moving time.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	calls int
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.now
}

// peek reads the time without counting a call.
func (c *fakeClock) peek() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) nowCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// waitTicks waits until the clock has been read n more times (by Run's
// ticks when the test itself is not reading it).
func (c *fakeClock) waitTicks(t *testing.T, n int) {
	t.Helper()
	start := c.nowCalls()
	eventually(t, "tracker ticks", func() bool { return c.nowCalls() >= start+n })
}

// fakeLeader wraps a real FSM state; Propose applies at once.
type fakeLeader struct {
	clock *fakeClock
	term  uint64

	mu      sync.Mutex
	st      *fsm.State
	index   uint64
	applied []proto.Message
}

func newFakeLeader(t *testing.T, clock *fakeClock, term uint64) *fakeLeader {
	t.Helper()
	l := &fakeLeader{clock: clock, term: term, st: fsm.New()}
	l.mustPropose(t, &logpb.LeaderEstablished{Term: term, LeaderId: "coord-1"})
	return l
}

func (l *fakeLeader) State() *fsm.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

func (l *fakeLeader) Propose(ctx context.Context, c commands.Command) (*logpb.Result, error) {
	if !c.Checked() {
		return nil, fmt.Errorf("%w: %s was not built by commands.New", commands.ErrInvalid, c.Type)
	}
	body := c.Body
	if c.LeaderTerm == 0 {
		c.LeaderTerm = commands.DecisionTerm(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.ProposedAtUnixMs = l.clock.peek().UnixMilli()
	if c.LeaderTerm == 0 {
		c.LeaderTerm = l.term
	}
	next, results, err := l.st.ApplyCommands(l.index+1, c)
	if err != nil {
		return nil, err
	}
	l.index++
	l.st = next
	l.applied = append(l.applied, proto.Clone(body))
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

func (l *fakeLeader) downs() []*logpb.MarkStreamingNodeDown {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*logpb.MarkStreamingNodeDown
	for _, b := range l.applied {
		if d, ok := b.(*logpb.MarkStreamingNodeDown); ok {
			out = append(out, d)
		}
	}
	return out
}

func (l *fakeLeader) register(t *testing.T, addr string) *logpb.StreamingNodeRecord {
	t.Helper()
	id := l.mustPropose(t, &logpb.RegisterStreamingNode{Address: addr, Incarnation: "inc-" + addr}).GetRegisterNode().GetNodeId()
	return l.node(t, id)
}

func (l *fakeLeader) node(t *testing.T, id uint64) *logpb.StreamingNodeRecord {
	t.Helper()
	n, ok := l.State().StreamingNode(id)
	if !ok {
		t.Fatalf("node %d not in the FSM", id)
	}
	return n
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func waitClosed(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func rv(n *logpb.StreamingNodeRecord) fsm.AssignmentVersion {
	return fsm.VersionOf(n.RegisteredVersion)
}

const ttl = time.Second

func newTracker(t *testing.T) (*Tracker, *fakeLeader, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	leader := newFakeLeader(t, clock, 3)
	return New(leader, Config{TTL: ttl, Now: clock.Now}), leader, clock
}

// startRun runs the tracker's leader routine until the returned stop is
// called; it returns once the fresh-TTL reset is done.
func startRun(t *testing.T, tr *Tracker, term uint64) (stop func()) {
	t.Helper()
	reset := tr.Changed()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Run(ctx, term)
	}()
	waitClosed(t, "Run's reset", reset)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			waitClosed(t, "Run to return", done)
		})
	}
	t.Cleanup(stop)
	return stop
}

// ---- 9. Heartbeat and Healthy ---------------------------------------------------

func TestHealthyNeedsUpFreshHeartbeatAndCaughtUpVersion(t *testing.T) {
	tr, leader, clock := newTracker(t)
	n1 := leader.register(t, "10.0.0.1:1001")
	n2 := leader.register(t, "10.0.0.2:1002")
	v1, v2 := rv(n1), rv(n2)
	if v2.Global != 3 || v2.Local == 0 || !v1.Less(v2) {
		t.Fatalf("registered versions %v, %v", v1, v2)
	}
	if tr.TTL() != ttl {
		t.Fatalf("TTL %v", tr.TTL())
	}

	if tr.Healthy(n2.Id) {
		t.Fatal("healthy before any heartbeat")
	}
	if _, ok := tr.LastSeen(n2.Id); ok {
		t.Fatal("LastSeen before any heartbeat")
	}

	// Seen version below the registration: not ready.
	ch := tr.Changed()
	for _, seen := range []fsm.AssignmentVersion{
		{},
		{Global: v2.Global, Local: v2.Local - 1},
		{Global: v2.Global - 1, Local: v2.Local + 100}, // a lower Global loses whatever its Local
	} {
		tr.Heartbeat(n2.Id, n2.Epoch, seen)
		if tr.Healthy(n2.Id) {
			t.Fatalf("healthy having seen only %v < %v", seen, v2)
		}
	}
	if closed(ch) {
		t.Fatal("Changed fired while the node is not ready")
	}

	// Caught up exactly: healthy, and Changed fires.
	tr.Heartbeat(n2.Id, n2.Epoch, v2)
	if !tr.Healthy(n2.Id) {
		t.Fatal("not healthy having seen its registration")
	}
	if !closed(ch) {
		t.Fatal("Changed did not fire when the node became ready")
	}
	// A higher Global with a lower Local is ahead (lexicographic).
	tr.Heartbeat(n1.Id, n1.Epoch, fsm.AssignmentVersion{Global: v1.Global + 1})
	if !tr.Healthy(n1.Id) {
		t.Fatal("n1 not healthy with a newer Global")
	}

	// Nothing changes: no notification; the seen version never goes back.
	ch = tr.Changed()
	tr.Heartbeat(n2.Id, n2.Epoch, fsm.AssignmentVersion{})
	if !tr.Healthy(n2.Id) || closed(ch) {
		t.Fatalf("older seen version: healthy=%v changed=%v", tr.Healthy(n2.Id), closed(ch))
	}

	// TTL: exactly TTL old is still fresh; one past is not.
	clock.Advance(ttl)
	if !tr.Healthy(n2.Id) {
		t.Fatal("unhealthy exactly at the TTL")
	}
	clock.Advance(time.Millisecond)
	if tr.Healthy(n2.Id) {
		t.Fatal("healthy past the TTL")
	}
	if d, ok := tr.LastSeen(n2.Id); !ok || d != ttl+time.Millisecond {
		t.Fatalf("LastSeen %v %v", d, ok)
	}
	// A heartbeat revives the session: that is a health change.
	ch = tr.Changed()
	tr.Heartbeat(n2.Id, n2.Epoch, v2)
	if !tr.Healthy(n2.Id) || !closed(ch) {
		t.Fatalf("revived: healthy=%v changed=%v", tr.Healthy(n2.Id), closed(ch))
	}

	// Only UP nodes are healthy.
	leader.mustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: n2.Id, Draining: true})
	tr.Heartbeat(n2.Id, n2.Epoch, v2)
	if tr.Healthy(n2.Id) {
		t.Fatal("DRAINING node healthy")
	}
	leader.mustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: n2.Id, Draining: false})
	if !tr.Healthy(n2.Id) {
		t.Fatal("undrained node not healthy")
	}
	leader.mustPropose(t, &logpb.MarkStreamingNodeDown{NodeId: n2.Id, Epoch: n2.Epoch, Reason: "test"})
	tr.Heartbeat(n2.Id, n2.Epoch, v2)
	if tr.Healthy(n2.Id) {
		t.Fatal("DOWN node healthy")
	}
	if tr.Healthy(999) {
		t.Fatal("unknown node healthy")
	}
}

func TestHeartbeatWithAnotherEpochStartsNewSession(t *testing.T) {
	tr, leader, _ := newTracker(t)
	n := leader.register(t, "10.0.0.1:1001")
	v := rv(n)
	tr.Heartbeat(n.Id, n.Epoch, v)
	if !tr.Healthy(n.Id) {
		t.Fatal("not healthy")
	}

	// A heartbeat from another epoch replaces the session; it does not
	// count for the registered epoch.
	tr.Heartbeat(n.Id, n.Epoch+100, fsm.AssignmentVersion{Global: 99})
	if tr.Healthy(n.Id) {
		t.Fatal("healthy on a session of another epoch")
	}
	// Back at the right epoch, a new session: the other session's seen
	// version is not carried over.
	tr.Heartbeat(n.Id, n.Epoch, fsm.AssignmentVersion{})
	if tr.Healthy(n.Id) {
		t.Fatal("new session inherited the seen version of another epoch")
	}
	ch := tr.Changed()
	tr.Heartbeat(n.Id, n.Epoch, v)
	if !tr.Healthy(n.Id) || !closed(ch) {
		t.Fatalf("caught-up new session: healthy=%v changed=%v", tr.Healthy(n.Id), closed(ch))
	}
}

// ---- 10. Run ----------------------------------------------------------------------

func TestRunMarksSilentNodesDown(t *testing.T) {
	tr, leader, clock := newTracker(t)
	n1 := leader.register(t, "10.0.0.1:1001")
	n2 := leader.register(t, "10.0.0.2:1002")
	startRun(t, tr, 3)

	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	clock.Advance(600 * time.Millisecond)
	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	clock.waitTicks(t, 3)
	if leader.node(t, n1.Id).State != logpb.NodeState_NODE_UP {
		t.Fatal("n1 marked down within its TTL")
	}

	ch := tr.Changed()
	clock.Advance(600 * time.Millisecond) // n1 silent for 1.2s, n2 for 0.6s
	eventually(t, "n1 down", func() bool { return leader.node(t, n1.Id).State == logpb.NodeState_NODE_DOWN })
	waitClosed(t, "Changed after marking down", ch)
	rec := leader.node(t, n1.Id)
	if !strings.Contains(rec.Reason, "heartbeat") || !strings.Contains(rec.Reason, ttl.String()) {
		t.Fatalf("down reason %q does not mention the TTL", rec.Reason)
	}
	downs := leader.downs()
	if len(downs) != 1 || downs[0].NodeId != n1.Id || downs[0].Epoch != n1.Epoch {
		t.Fatalf("MarkStreamingNodeDown commands %v, want one for node %d at epoch %d", downs, n1.Id, n1.Epoch)
	}
	if tr.Healthy(n1.Id) {
		t.Fatal("down node healthy")
	}

	// n2 keeps heartbeating: never marked down.
	for i := 0; i < 5; i++ {
		tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
		clock.Advance(ttl) // exactly the TTL: still within it
		clock.waitTicks(t, 2)
	}
	if leader.node(t, n2.Id).State != logpb.NodeState_NODE_UP || len(leader.downs()) != 1 {
		t.Fatalf("heartbeating node marked down: %v", leader.downs())
	}
}

func TestNewLeadershipGivesFreshTTL(t *testing.T) {
	tr, leader, clock := newTracker(t)
	n1 := leader.register(t, "10.0.0.1:1001")
	n2 := leader.register(t, "10.0.0.2:1002")
	stop := startRun(t, tr, 3)
	tr.Heartbeat(n1.Id, n1.Epoch, rv(n1))
	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	stop() // leadership lost

	// Much later, leadership again: the last heartbeats are far older than
	// the TTL, but nobody is judged on them.
	clock.Advance(time.Minute)
	startRun(t, tr, 5)
	clock.waitTicks(t, 3)
	for _, n := range []*logpb.StreamingNodeRecord{n1, n2} {
		if leader.node(t, n.Id).State != logpb.NodeState_NODE_UP {
			t.Fatalf("node %d marked down at the start of a leadership", n.Id)
		}
		// Live nodes stay healthy through the fresh TTL, without having to
		// heartbeat first (otherwise the first node to heartbeat would be
		// handed every channel).
		if !tr.Healthy(n.Id) {
			t.Fatalf("node %d unhealthy right after a new leadership", n.Id)
		}
		if d, ok := tr.LastSeen(n.Id); !ok || d != 0 {
			t.Fatalf("node %d LastSeen %v %v, want a fresh session", n.Id, d, ok)
		}
	}

	// A node registered during the term starts its TTL when first seen.
	clock.Advance(600 * time.Millisecond)
	tr.Heartbeat(n1.Id, n1.Epoch, rv(n1))
	n3 := leader.register(t, "10.0.0.3:1003")
	eventually(t, "n3 observed", func() bool { _, ok := tr.LastSeen(n3.Id); return ok })
	if tr.Healthy(n3.Id) {
		t.Fatal("new node healthy before it caught up to its registration")
	}
	clock.Advance(600 * time.Millisecond) // 1.2s since the new term, 0.6s since n3 was seen
	tr.Heartbeat(n1.Id, n1.Epoch, rv(n1))
	eventually(t, "n2 down", func() bool { return leader.node(t, n2.Id).State == logpb.NodeState_NODE_DOWN })
	clock.waitTicks(t, 3)
	if leader.node(t, n3.Id).State != logpb.NodeState_NODE_UP {
		t.Fatal("n3 judged from the start of the term, not from when it was first seen")
	}
	clock.Advance(500 * time.Millisecond) // 1.1s since n3 was seen
	tr.Heartbeat(n1.Id, n1.Epoch, rv(n1))
	eventually(t, "n3 down", func() bool { return leader.node(t, n3.Id).State == logpb.NodeState_NODE_DOWN })
	if leader.node(t, n1.Id).State != logpb.NodeState_NODE_UP {
		t.Fatal("heartbeating n1 marked down")
	}
	for _, d := range leader.downs() {
		if d.NodeId == n1.Id {
			t.Fatalf("n1 proposed down: %v", d)
		}
	}
}

// A node registered during the term becomes healthy once it heartbeats
// having seen its registration; Changed tells the balancer.
func TestNodeRegisteredDuringTermBecomesReady(t *testing.T) {
	tr, leader, _ := newTracker(t)
	startRun(t, tr, 3)
	n := leader.register(t, "10.0.0.9:1009")
	tr.Heartbeat(n.Id, n.Epoch, fsm.AssignmentVersion{Global: rv(n).Global, Local: rv(n).Local - 1})
	if tr.Healthy(n.Id) {
		t.Fatal("healthy before catching up")
	}
	ch := tr.Changed()
	tr.Heartbeat(n.Id, n.Epoch, rv(n))
	waitClosed(t, "Changed on readiness", ch)
	if !tr.Healthy(n.Id) {
		t.Fatal("not healthy after catching up")
	}
}
