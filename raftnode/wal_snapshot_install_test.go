package raftnode_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// TestWALFollowerCatchesUpAfterSnapshotPastItsLog: a raft-wal follower that
// has a log, is stopped while the leader compacts past the end of that log,
// and is reopened on the same data dir installs the leader's snapshot, then
// catches up and keeps appending.
//
// What makes this case special: after installing a snapshot, hashicorp/raft
// (v1.8.0, installSnapshot) removes the whole log of a raft.MonotonicLogStore
// but only compacts any other store, keeping up to TrailingLogs entries
// below the snapshot. raft-wal is monotonic: it refuses an append that does
// not follow its last entry. coordd wraps the log store
// (watchedLogStore{retainingLogStore{raft-wal}}), and when a wrapper hid
// IsMonotonic the follower kept the tail of its old log, so the leader's
// next AppendEntries (index snapshot+1) failed in raft-wal with
// "non-monotonic log entries" on every retry: the follower installed the
// snapshot and then never applied another entry. The member reported it
// only through AppendError, which this test watches throughout.
func TestWALFollowerCatchesUpAfterSnapshotPastItsLog(t *testing.T) {
	c := newCluster(t, 3, withConfig(func(i int, cfg *raftnode.Config) {
		useWAL(i, cfg)
		// Snapshots every 64 entries (and when the test asks), 16 entries
		// kept behind them: the leader soon compacts past the follower.
		smallSnapshots(i, cfg)
	}))
	l := c.waitLeader()
	f := (l + 1) % 3
	follower := c.node(f)

	// Every member has a log; the follower has no snapshot of its own yet,
	// so all it knows is in its raft-wal log.
	writeEntries(t, c.node(l), "before", 20)
	c.waitConverged(0, 1, 2)
	if _, _, ok := follower.LastSnapshot(); ok {
		t.Fatalf("precondition: n%d already has a snapshot", f)
	}
	c.stop(f)
	old, err := datadir.InspectDataDir(c.cfgs[f].DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if old.LogStore != datadir.LogStoreWAL || old.FirstIndex == 0 {
		t.Fatalf("precondition: stopped n%d has log store %q, log %d..%d; want a non-empty wal log",
			f, old.LogStore, old.FirstIndex, old.LastIndex)
	}

	// With the follower down, the leader snapshots twice (coordd keeps the log back to
	// the older of its two retained snapshots) and compacts past the end of
	// the follower's log, so only a snapshot can bring the follower back.
	for round := 0; round < 2; round++ {
		c.writeOnLeader(fmt.Sprintf("while-down-%d", round), 80, f)
		if err := c.node(c.waitLeader(f)).Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.node(c.waitLeader(f))
	snapIndex, _, ok := leader.LastSnapshot()
	if !ok {
		t.Fatal("precondition: the leader has no snapshot after Snapshot()")
	}
	first, err := leader.FirstLogIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= old.LastIndex+1 {
		t.Fatalf("precondition: the leader's log starts at %d, the stopped follower's ends at %d: no snapshot needed",
			first, old.LastIndex)
	}
	// Entries after the snapshot, so catching up takes an append past the
	// snapshot and not the snapshot alone.
	writeEntries(t, leader, "after-snapshot", 5)
	target := leader.Raft().AppliedIndex()
	t.Logf("follower n%d log %d..%d; leader n%d snapshot at %d, log from %d, applied %d",
		f, old.FirstIndex, old.LastIndex, c.index(leader), snapIndex, first, target)

	// waitFollower waits until cond holds on the reopened follower n,
	// failing at once (not at the timeout) when an append to its log fails.
	var n *raftnode.Node
	waitFollower := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		var appendErr error
		var since time.Time
		waitFor(t, timeout, func() bool {
			if since, appendErr = n.AppendError(); appendErr != nil {
				return true
			}
			return cond()
		}, "n%d: %s", f, what)
		if appendErr != nil {
			t.Fatalf("n%d %s: it %v (failing since %v; raft applied %d, leader at %d); "+
				"its old log outlived the snapshot, so raft-wal refuses the entries after it",
				f, what, appendErr, time.Since(since).Round(time.Millisecond), n.Raft().AppliedIndex(), target)
		}
	}

	n = c.open(f)
	// The leader's replication goroutine backs off while the follower is
	// down (up to 10.24 s in raft v1.8.0), so the first contact may take
	// that long.
	waitFollower("installs the leader's snapshot", 2*opTimeout, func() bool {
		idx, _, ok := n.LastSnapshot()
		return ok && idx >= snapIndex
	})
	waitFollower("catches up past the snapshot", opTimeout, func() bool {
		return n.Raft().AppliedIndex() >= target
	})
	// The log it had before the snapshot is gone: raft removed it whole, as
	// it does for a monotonic log store.
	if got, err := n.FirstLogIndex(); err != nil || got <= old.LastIndex {
		t.Fatalf("n%d log starts at %d (%v) after installing the snapshot at %d: its old log (%d..%d) was kept",
			f, got, err, snapIndex, old.FirstIndex, old.LastIndex)
	}

	// It keeps appending and applying as a normal follower.
	c.writeOnLeader("after-catch-up", 10)
	leader = c.node(c.waitLeader())
	target = leader.Raft().AppliedIndex()
	waitFollower("applies the writes after catching up", opTimeout, func() bool {
		return n.Raft().AppliedIndex() >= target
	})
	c.waitConverged(0, 1, 2)
	if _, err := n.AppendError(); err != nil {
		t.Fatalf("n%d after converging: %v", f, err)
	}
}
