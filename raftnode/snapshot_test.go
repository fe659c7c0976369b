package raftnode_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

// smallSnapshots makes raft snapshot and compact its log after a few dozen
// entries.
func smallSnapshots(_ int, cfg *raftnode.Config) {
	cfg.SnapshotThreshold = 64
	cfg.TrailingLogs = 16
	cfg.SnapshotInterval = 100 * time.Millisecond
}

// writeEntries commits k proposals one by one (so each is its own log entry)
// on the leader n, alternating ID reservations and member upserts.
func writeEntries(t *testing.T, n *raftnode.Node, prefix string, k int) {
	t.Helper()
	for j := 0; j < k; j++ {
		id := fmt.Sprintf("%s-%d", prefix, j)
		var body proto.Message = &logpb.ReserveIDs{Count: uint64(1 + j%3)}
		if j%4 == 3 {
			body = &logpb.UpsertMember{Member: &logpb.Member{
				Id: fmt.Sprintf("m%d", j%7), RaftAddr: "127.0.0.1:" + strconv.Itoa(7000+j)}}
		}
		mustPropose(t, n, body, id)
	}
}

// TestSnapshotInstallOnLaggingFollower cuts a follower off, commits far more
// entries than the leader keeps in its log, and checks that the follower
// catches up through InstallSnapshot to a byte-identical state, and keeps
// applying normally afterwards.
func TestSnapshotInstallOnLaggingFollower(t *testing.T) {
	c := newCluster(t, 3, withConfig(smallSnapshots))
	l := c.waitLeader()
	leader := c.node(l)
	f := (l + 1) % 3
	lagger := c.node(f)

	c.isolate(f)
	if _, _, ok := lagger.LastSnapshot(); ok {
		t.Fatalf("precondition: n%d already has a snapshot", f)
	}
	writeEntries(t, leader, "while-lagging", 300)
	if err := leader.Snapshot(); err != nil {
		t.Fatalf("snapshot on leader: %v", err)
	}
	snapIndex, _, ok := leader.LastSnapshot()
	if !ok {
		t.Fatal("leader has no snapshot after Snapshot()")
	}
	// The follower cannot catch up from the log: the leader compacted it
	// past the follower's last entry (no entry reaches an isolated node).
	laggerLast := lagger.Raft().LastIndex()
	firstLog, err := leader.FirstLogIndex()
	if err != nil {
		t.Fatalf("leader first log index: %v", err)
	}
	if firstLog <= laggerLast+1 {
		t.Fatalf("precondition: leader log starts at %d, follower has up to %d: no snapshot needed", firstLog, laggerLast)
	}
	t.Logf("leader snapshot at %d, log from %d; follower n%d has up to %d", snapIndex, firstLog, f, laggerLast)

	c.heal(f)
	st := c.waitConverged(0, 1, 2)
	idx, _, ok := lagger.LastSnapshot()
	if !ok || idx < snapIndex {
		t.Fatalf("follower n%d snapshot: index %d (present %v), want an installed snapshot at >= %d", f, idx, ok, snapIndex)
	}
	// Raft records the installed snapshot just after the FSM restore that
	// woke WaitApplied, so poll.
	waitFor(t, opTimeout, func() bool {
		s := lagger.Raft().Stats()["last_snapshot_index"]
		return s != "0" && s != ""
	}, "follower n%d raft stats to report a snapshot", f)
	if got, ok := st.LookupRequest("while-lagging-299"); !ok || got.Rejection != nil {
		t.Fatalf("last write while lagging recorded as %v (found %v)", got, ok)
	}

	// After the restore the follower keeps applying entries on top of it.
	writeEntries(t, c.node(c.waitLeader()), "after-install", 20)
	c.waitConverged(0, 1, 2)
}

// TestRestartFollowerWithExistingState stops a follower that has a snapshot
// and log entries after it, commits more without it, and reopens it on the
// same data directory without bootstrapping: it restores its own state from
// disk, rejoins and catches up.
func TestRestartFollowerWithExistingState(t *testing.T) {
	c := newCluster(t, 3, withConfig(smallSnapshots))
	l := c.waitLeader()
	f := (l + 1) % 3
	writeEntries(t, c.node(l), "phase1", 100)
	c.waitConverged(0, 1, 2)
	if err := c.node(f).Snapshot(); err != nil {
		t.Fatalf("snapshot on follower: %v", err)
	}
	writeEntries(t, c.node(l), "phase2", 10) // log entries after the snapshot
	before := c.waitConverged(0, 1, 2)

	c.stop(f)
	l = c.waitLeader()
	writeEntries(t, c.node(l), "while-down", 30)

	n := c.open(f)
	has, err := n.HasExistingState()
	if err != nil || !has {
		t.Fatalf("reopened n%d: HasExistingState = %v, %v; want true", f, has, err)
	}
	// Raft restored the snapshot synchronously in Open: the node starts from
	// its own durable state, not from empty.
	if got := n.State(); got.AppliedIndex() == 0 || got.NextID() == 1 {
		t.Fatalf("reopened n%d starts from an empty state (applied %d, NextID %d)", f, got.AppliedIndex(), got.NextID())
	}
	after := c.waitConverged(0, 1, 2)
	if after.AppliedIndex() <= before.AppliedIndex() {
		t.Fatalf("applied index did not advance: %d -> %d", before.AppliedIndex(), after.AppliedIndex())
	}
	if _, ok := n.State().LookupRequest("while-down-29"); !ok {
		t.Fatalf("reopened n%d is missing the writes made while it was down", f)
	}
}

// TestRestartWholeCluster stops every node and reopens them all on their
// data directories: committed state survives (recovered from the logs, as no
// snapshot was taken) and the cluster serves writes again.
func TestRestartWholeCluster(t *testing.T) {
	c := newCluster(t, 3)
	l := c.waitLeader()
	writeEntries(t, c.node(l), "before", 20)
	before := c.waitConverged(0, 1, 2)

	for i := 0; i < 3; i++ {
		c.stop(i)
	}
	for i := 0; i < 3; i++ {
		n := c.open(i)
		if has, err := n.HasExistingState(); err != nil || !has {
			t.Fatalf("reopened n%d: HasExistingState = %v, %v; want true", i, has, err)
		}
	}
	l = c.waitLeader()
	st := linearizableRead(t, c.node(l))
	if st.NextID() != before.NextID() {
		t.Fatalf("NextID after restart = %d, want %d", st.NextID(), before.NextID())
	}
	for j := 0; j < 20; j++ {
		id := fmt.Sprintf("before-%d", j)
		want, _ := before.LookupRequest(id)
		if got, ok := st.LookupRequest(id); !ok || !proto.Equal(got, want) {
			t.Fatalf("%s after restart: %v (found %v), want %v", id, got, ok, want)
		}
	}
	res := mustPropose(t, c.node(l), &logpb.ReserveIDs{Count: 1}, "after-restart")
	if first, _ := idRange(t, res); first != before.NextID() {
		t.Fatalf("first ID after restart = %d, want %d", first, before.NextID())
	}
	c.waitConverged(0, 1, 2)
}
