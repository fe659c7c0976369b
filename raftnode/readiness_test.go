package raftnode_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/coordd/coordd/raftnode"
)

// applyGate blocks a node's FSM goroutine on its next applied command once
// armed (through the apply observer), as a member stuck on a slow disk or a
// huge snapshot would be.
type applyGate struct {
	mu      sync.Mutex
	armed   bool
	blocked chan struct{} // closed when the FSM goroutine is held
	release chan struct{}
	once    sync.Once
}

func newApplyGate() *applyGate {
	return &applyGate{blocked: make(chan struct{}), release: make(chan struct{})}
}

func (g *applyGate) observe(uint64, int) {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(g.blocked)
		<-g.release
	}
}

func (g *applyGate) arm() { g.mu.Lock(); g.armed = true; g.mu.Unlock() }

func (g *applyGate) open() { g.once.Do(func() { close(g.release) }) }

// TestReadinessFarBehindLeader: a follower whose FSM is held (so it cannot
// finish installing the snapshot the leader sends it) keeps a leader and
// its own commit index and applied index agree, so by its own numbers it
// looks current; the commit index the leader told it about shows it is
// hundreds of entries behind. It must not be ready, with a reason naming
// the numbers, and must be ready again once it has caught up.
func TestReadinessFarBehindLeader(t *testing.T) {
	const maxLag = 100
	gates := []*applyGate{newApplyGate(), newApplyGate(), newApplyGate()}
	c := newCluster(t, 3, withConfig(smallSnapshots), withSetup(func(i int, n *raftnode.Node) {
		n.SetApplyObserver(gates[i].observe)
	}))
	for _, g := range gates {
		t.Cleanup(g.open) // before the cluster's shutdown (cleanups run last first)
	}
	l := c.waitLeader()
	f := (l + 1) % 3
	// Every write goes to whichever member leads at the time: on a loaded
	// machine leadership may move mid-test, and this test is about f.
	c.writeOnLeader("warm", 5)
	c.waitConverged(0, 1, 2)
	if r := c.node(f).Readiness(maxLag); !r.Ready {
		t.Fatalf("precondition: converged follower not ready: %+v", r)
	}

	// Hold f's FSM on the next entry, then let the leader run far ahead and
	// compact its log, so f can only catch up by a snapshot it cannot apply.
	gates[f].arm()
	c.writeOnLeader("held", 1)
	<-gates[f].blocked
	c.isolate(f)
	c.writeOnLeader("ahead", 4*maxLag, f)
	if err := c.node(c.waitLeader(f)).Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.heal(f)

	var r raftnode.Readiness
	waitFor(t, opTimeout, func() bool {
		r = c.node(f).Readiness(maxLag)
		return strings.Contains(r.Status, "far behind the leader")
	}, "n%d to report it is far behind the leader", f)
	if r.Ready || r.LeaderID == "" || r.LeaderCommitIndex <= r.AppliedIndex+maxLag {
		t.Fatalf("readiness of the held follower = %+v", r)
	}
	t.Logf("held follower: %+v", r)
	// Its own numbers alone would have passed: its commit index is within a
	// few entries of what it applied (the check /readyz made before).
	if r.CommitIndex > r.AppliedIndex+64 {
		t.Fatalf("precondition: the held follower's own commit index %d is far past its applied index %d", r.CommitIndex, r.AppliedIndex)
	}

	gates[f].open()
	waitFor(t, opTimeout, func() bool {
		r = c.node(f).Readiness(maxLag)
		return r.Ready
	}, "n%d to be ready after catching up", f)
	if r.AppliedIndex+maxLag < r.LeaderCommitIndex {
		t.Fatalf("ready while %d entries behind: %+v", r.LeaderCommitIndex-r.AppliedIndex, r)
	}
}

// TestReadinessLeaderAndFollowers: converged members are ready, and a
// follower has heard the leader's commit index; an isolated one that knows
// no leader is not ready.
func TestReadinessLeaderAndFollowers(t *testing.T) {
	c := newCluster(t, 3)
	l := c.waitLeader()
	writeEntries(t, c.node(l), "x", 3)
	c.waitConverged(0, 1, 2)
	for i := 0; i < 3; i++ {
		r := c.node(i).Readiness(raftnode.DefaultReadyMaxLag)
		if !r.Ready || r.Status != "ready" {
			t.Errorf("n%d: %+v; want ready", i, r)
		}
		if i != l && r.LeaderCommitIndex == 0 {
			t.Errorf("n%d: follower heard no commit index from the leader: %+v", i, r)
		}
	}
	f := (l + 1) % 3
	c.isolate(f)
	var r raftnode.Readiness
	waitFor(t, opTimeout, func() bool {
		r = c.node(f).Readiness(raftnode.DefaultReadyMaxLag)
		return !r.Ready && r.Status == "no leader known"
	}, "isolated n%d to know no leader", f)
}
