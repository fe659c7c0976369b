package nodehealth

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/testutil"
)

// ---- helpers -------------------------------------------------------------------

func downs(l *controllertest.Leader) []*logpb.MarkStreamingNodeDown {
	return controllertest.AppliedOf[*logpb.MarkStreamingNodeDown](l)
}

func register(t *testing.T, l *controllertest.Leader, addr string) *logpb.StreamingNodeRecord {
	t.Helper()
	id := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: addr, Incarnation: "inc-" + addr}).GetRegisterNode().GetNodeId()
	return node(t, l, id)
}

func node(t *testing.T, l *controllertest.Leader, id uint64) *logpb.StreamingNodeRecord {
	t.Helper()
	n, ok := l.State().StreamingNode(id)
	if !ok {
		t.Fatalf("node %d not in the FSM", id)
	}
	return n
}

// advance moves the clock by d (at least one tick period) and waits until
// Run has finished an expiry check at the new time.
func advance(t *testing.T, tr *Tracker, clock *clockwork.FakeClock, d time.Duration) {
	t.Helper()
	clock.Advance(d)
	now := clock.Now().UnixNano()
	testutil.Eventually(t, "the tracker's check at the advanced time", func() bool { return tr.checkedAt.Load() >= now })
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
	case <-time.After(testutil.Timeout(testutil.DefaultWait)):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func rv(n *logpb.StreamingNodeRecord) fsm.AssignmentVersion {
	return fsm.VersionOf(n.RegisteredVersion)
}

const ttl = time.Second

func newTracker(t *testing.T) (*Tracker, *controllertest.Leader, *clockwork.FakeClock) {
	t.Helper()
	clock := controllertest.NewClock()
	leader := controllertest.NewLeader(t, clock, 3)
	return New(leader, Config{TTL: ttl, Clock: clock}), leader, clock
}

// startRun runs the tracker's leader routine until the returned stop is
// called; it returns once the fresh-TTL reset is done and the expiry
// ticker waits on the clock.
func startRun(t *testing.T, tr *Tracker, clock *clockwork.FakeClock, term uint64) (stop func()) {
	t.Helper()
	reset := tr.Changed()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Run(ctx, term, tr.leader)
	}()
	waitClosed(t, "Run's reset", reset)
	controllertest.WaitForTimers(t, clock, 1)
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
	n1 := register(t, leader, "10.0.0.1:1001")
	n2 := register(t, leader, "10.0.0.2:1002")
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
	leader.MustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: n2.Id, Draining: true})
	tr.Heartbeat(n2.Id, n2.Epoch, v2)
	if tr.Healthy(n2.Id) {
		t.Fatal("DRAINING node healthy")
	}
	leader.MustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: n2.Id, Draining: false})
	if !tr.Healthy(n2.Id) {
		t.Fatal("undrained node not healthy")
	}
	leader.MustPropose(t, &logpb.MarkStreamingNodeDown{NodeId: n2.Id, Epoch: n2.Epoch, Reason: "test"})
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
	n := register(t, leader, "10.0.0.1:1001")
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
	n1 := register(t, leader, "10.0.0.1:1001")
	n2 := register(t, leader, "10.0.0.2:1002")
	startRun(t, tr, clock, 3)

	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	advance(t, tr, clock, 600*time.Millisecond)
	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	if node(t, leader, n1.Id).State != logpb.NodeState_NODE_UP {
		t.Fatal("n1 marked down within its TTL")
	}

	ch := tr.Changed()
	advance(t, tr, clock, 600*time.Millisecond) // n1 silent for 1.2s, n2 for 0.6s
	if node(t, leader, n1.Id).State != logpb.NodeState_NODE_DOWN {
		t.Fatal("n1 not marked down at the first tick past its TTL")
	}
	waitClosed(t, "Changed after marking down", ch)
	rec := node(t, leader, n1.Id)
	if !strings.Contains(rec.Reason, "heartbeat") || !strings.Contains(rec.Reason, ttl.String()) {
		t.Fatalf("down reason %q does not mention the TTL", rec.Reason)
	}
	ds := downs(leader)
	if len(ds) != 1 || ds[0].NodeId != n1.Id || ds[0].Epoch != n1.Epoch {
		t.Fatalf("MarkStreamingNodeDown commands %v, want one for node %d at epoch %d", ds, n1.Id, n1.Epoch)
	}
	if tr.Healthy(n1.Id) {
		t.Fatal("down node healthy")
	}

	// n2 keeps heartbeating: never marked down.
	for i := 0; i < 5; i++ {
		tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
		advance(t, tr, clock, ttl) // exactly the TTL: still within it
	}
	if node(t, leader, n2.Id).State != logpb.NodeState_NODE_UP || len(downs(leader)) != 1 {
		t.Fatalf("heartbeating node marked down: %v", downs(leader))
	}
}

// TestSessionsOfDownNodesArePruned: once a node is DOWN its session is
// dropped at the next check, so sessions do not accumulate.
func TestSessionsOfDownNodesArePruned(t *testing.T) {
	tr, leader, clock := newTracker(t)
	n1 := register(t, leader, "10.0.0.1:1001")
	n2 := register(t, leader, "10.0.0.2:1002")
	startRun(t, tr, clock, 3)
	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	if n := tr.Sessions(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
	leader.MustPropose(t, &logpb.MarkStreamingNodeDown{NodeId: n1.Id, Epoch: n1.Epoch, Reason: "test"})
	advance(t, tr, clock, 100*time.Millisecond)
	if n := tr.Sessions(); n != 1 {
		t.Fatalf("%d sessions after node %d went DOWN, want 1", n, n1.Id)
	}
	if _, ok := tr.LastSeen(n1.Id); ok {
		t.Fatal("the DOWN node's session is still kept")
	}
}

func TestNewLeadershipGivesFreshTTL(t *testing.T) {
	tr, leader, clock := newTracker(t)
	n1 := register(t, leader, "10.0.0.1:1001")
	n2 := register(t, leader, "10.0.0.2:1002")
	stop := startRun(t, tr, clock, 3)
	tr.Heartbeat(n1.Id, n1.Epoch, rv(n1))
	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	stop() // leadership lost

	// Much later, leadership again: the last heartbeats are far older than
	// the TTL, but nobody is judged on them.
	clock.Advance(time.Minute)
	startRun(t, tr, clock, 5)
	for _, n := range []*logpb.StreamingNodeRecord{n1, n2} {
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
	advance(t, tr, clock, 100*time.Millisecond)
	for _, n := range []*logpb.StreamingNodeRecord{n1, n2} {
		if node(t, leader, n.Id).State != logpb.NodeState_NODE_UP {
			t.Fatalf("node %d marked down at the start of a leadership", n.Id)
		}
	}

	// A node registered during the term starts its TTL when first seen.
	advance(t, tr, clock, 500*time.Millisecond) // 0.6s into the term
	tr.Heartbeat(n1.Id, n1.Epoch, rv(n1))
	n3 := register(t, leader, "10.0.0.3:1003")
	if _, ok := tr.LastSeen(n3.Id); ok {
		t.Fatal("n3 observed before a tick")
	}
	// The tick that observes n3 comes with no time passed since it registered.
	tick := max(ttl/40, 10*time.Millisecond)
	advance(t, tr, clock, tick)
	if _, ok := tr.LastSeen(n3.Id); !ok {
		t.Fatal("n3 not observed by the tick after its registration")
	}
	if tr.Healthy(n3.Id) {
		t.Fatal("new node healthy before it caught up to its registration")
	}
	advance(t, tr, clock, 600*time.Millisecond-tick) // 1.2s since the new term, 0.6s since n3 was seen
	tr.Heartbeat(n1.Id, n1.Epoch, rv(n1))
	if node(t, leader, n2.Id).State != logpb.NodeState_NODE_DOWN {
		t.Fatal("n2 not marked down 1.2s into the term")
	}
	if node(t, leader, n3.Id).State != logpb.NodeState_NODE_UP {
		t.Fatal("n3 judged from the start of the term, not from when it was first seen")
	}
	advance(t, tr, clock, 500*time.Millisecond) // 1.1s since n3 was seen
	if node(t, leader, n3.Id).State != logpb.NodeState_NODE_DOWN {
		t.Fatal("n3 not marked down 1.1s after it was first seen")
	}
	if node(t, leader, n1.Id).State != logpb.NodeState_NODE_UP {
		t.Fatal("heartbeating n1 marked down")
	}
	for _, d := range downs(leader) {
		if d.NodeId == n1.Id {
			t.Fatalf("n1 proposed down: %v", d)
		}
	}
}

// A node registered during the term becomes healthy once it heartbeats
// having seen its registration; Changed tells the balancer.
func TestNodeRegisteredDuringTermBecomesReady(t *testing.T) {
	tr, leader, clock := newTracker(t)
	startRun(t, tr, clock, 3)
	n := register(t, leader, "10.0.0.9:1009")
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
