package raftnode_test

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/raftnode"
)

// failingStableCluster is a three-member cluster whose members' term and
// vote writes to raft.db can be made to fail (fail[i]; nil lifts it).
// Its members cannot be restarted (their Storage is opened here).
func failingStableCluster(t *testing.T) (*testCluster, [3]func(error)) {
	var fail [3]func(error)
	c := newCluster(t, 3, withConfig(func(i int, cfg *raftnode.Config) {
		st, err := raftnode.OpenStorage(*cfg)
		if err != nil {
			t.Fatalf("open storage %d: %v", i, err)
		}
		fail[i] = st.FailStableWritesForTest()
		cfg.Storage = st
	}))
	return c, fail
}

// diskFull is what a write on a full file system returns.
var diskFull = &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}

// electAround makes the leader hand over to the member that is neither it
// nor victim, so the victim meets a newer term, and returns the new
// leader's index.
func electAround(t *testing.T, c *testCluster, leader, victim int) int {
	t.Helper()
	other := 3 - leader - victim
	term := c.node(leader).EstablishedTerm()
	if err := transferLeadership(c.node(leader), c.node(other)); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	var now int
	waitFor(t, electTimeout, func() bool {
		now = c.leaderNow(victim)
		return now >= 0 && c.node(now).EstablishedTerm() > term
	}, "a leader after term %d without n%d", term, victim)
	return now
}

// TestFullDiskMemberStepsOutAndRecovers: a member whose term write fails
// with ENOSPC at an election (probe D15: hashicorp/raft panicked in
// setCurrentTerm and took the process down) neither panics nor serves as
// ready: it says "disk full", takes no part while the others elect a
// leader and commit, and comes back by itself, caught up, once the write
// succeeds again.
func TestFullDiskMemberStepsOutAndRecovers(t *testing.T) {
	c, fail := failingStableCluster(t)
	leader := c.waitLeader()
	c.writeOnLeader("before", 4)
	victim := (leader + 1) % 3
	fail[victim](diskFull)
	leader = electAround(t, c, leader, victim)

	v := c.node(victim)
	waitFor(t, opTimeout, func() bool {
		r := v.Readiness(raftnode.DefaultReadyMaxLag)
		return !r.Ready && r.DiskFull && strings.HasPrefix(r.Status, "disk full: cannot store its term and vote")
	}, "n%d not ready, saying its disk is full", victim)
	if !v.DiskFull() {
		t.Fatal("DiskFull is false while the term write fails")
	}
	if term := v.Raft().CurrentTerm(); term >= c.node(leader).EstablishedTerm() {
		t.Fatalf("n%d took term %d without storing it", victim, term)
	}
	c.writeOnLeader("during", 6, victim)
	if r := v.Readiness(raftnode.DefaultReadyMaxLag); r.Ready || r.FailingSince.IsZero() {
		t.Fatalf("n%d while its disk is full: %+v", victim, r)
	}

	fail[victim](nil)
	waitFor(t, opTimeout, func() bool { return v.Readiness(raftnode.DefaultReadyMaxLag).Ready },
		"n%d ready again after its disk has space", victim)
	if v.DiskFull() || len(v.StorageFaults()) > 0 {
		t.Fatalf("faults after recovery: %v", v.StorageFaults())
	}
	c.writeOnLeader("after", 2)
	c.waitConverged(0, 1, 2)
}

// TestFullDiskMemberShutsDown: a member whose term write waits for space
// still shuts down, promptly and without a panic (the write never returns
// to raft), and leaves no goroutine behind (TestMain's goleak).
func TestFullDiskMemberShutsDown(t *testing.T) {
	c, fail := failingStableCluster(t)
	leader := c.waitLeader()
	victim := (leader + 1) % 3
	fail[victim](diskFull)
	electAround(t, c, leader, victim)
	waitFor(t, opTimeout, func() bool { return c.node(victim).DiskFull() }, "n%d reports its disk full", victim)
	start := time.Now()
	c.stop(victim)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("shutdown took %v", took)
	}
	c.writeOnLeader("after", 2, victim)
}
