package raftnode_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// lateSnapshotChild names the log store the child process of
// TestLateSnapshotAtAppliedIndex runs on.
const lateSnapshotChild = "RAFTNODE_LATE_SNAPSHOT_STORE"

// TestLateSnapshotAtAppliedIndex: a follower that has applied S and stored
// S+1 is handed the leader's InstallSnapshot of S again, as an overtaken
// replication stream delivers it (stale_snapshot.go). The snapshot is
// refused: installing it on raft-wal made hashicorp/raft v1.8.0 delete the
// whole log, S+1 included, under its in-memory last index, and the next
// commit panicked the follower ("log not found"), whose data dir was then
// refused as damaged. On both log stores the follower refuses it, keeps
// S+1 and applies the next commit.
//
// A panic kills the test binary, so each store's run is a child process
// and the parent fails when the child dies.
func TestLateSnapshotAtAppliedIndex(t *testing.T) {
	if store := os.Getenv(lateSnapshotChild); store != "" {
		lateSnapshotAtAppliedIndex(t, store)
		return
	}
	for _, store := range []string{datadir.LogStoreWAL, datadir.LogStoreBolt} {
		t.Run(store, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestLateSnapshotAtAppliedIndex$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), lateSnapshotChild+"="+store)
			out, err := cmd.CombinedOutput()
			if err == nil && bytes.Contains(out, []byte("--- SKIP")) {
				t.Skipf("the child on %s skipped: %s", store, out)
			}
			if err != nil || !bytes.Contains(out, []byte("--- PASS")) {
				lines := strings.Split(string(out), "\n")
				if len(lines) > 60 {
					lines = lines[:60]
				}
				t.Fatalf("the child on %s failed (%v):\n%s", store, err, strings.Join(lines, "\n"))
			}
		})
	}
}

func lateSnapshotAtAppliedIndex(t *testing.T, store string) {
	c := newCluster(t, 3, withConfig(func(i int, cfg *raftnode.Config) {
		cfg.LogStore, cfg.WALSegmentSize = store, walSegmentSize
		// Followers learn a commit index only with the next entry, so a
		// follower holds its last entry unapplied until the next write.
		cfg.CommitTimeout = time.Minute
		// One leader throughout, also on a loaded machine.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, time.Second
	}))
	l := c.waitLeader()
	leader := c.node(l)
	f := (l + 1) % 3
	follower := c.node(f)
	writeEntries(t, leader, "before", 10)

	// The leader's snapshot at S, its applied index.
	sf := leader.Raft().Snapshot()
	if err := sf.Error(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := sf.Open()
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	S := meta.Index

	// One more entry, which the follower stores with commit index S.
	writeEntries(t, leader, "stored-not-applied", 1)
	// It applies S from raft's FSM goroutine, just after storing S+1.
	waitFor(t, opTimeout, func() bool { return follower.Raft().LastIndex() == S+1 && follower.Raft().AppliedIndex() >= S },
		"follower stores entry %d and applies %d", S+1, S)
	if got := follower.Raft().AppliedIndex(); got != S {
		t.Skipf("schedule not reached: the follower applied %d, want %d", got, S)
	}

	// The leader's InstallSnapshot of S as raft builds it, delivered again.
	lc := c.cfgs[l]
	req := &raft.InstallSnapshotRequest{
		RPCHeader:          raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(lc.ID), Addr: []byte(lc.RaftAddr)},
		SnapshotVersion:    meta.Version,
		Term:               leader.Raft().CurrentTerm(),
		Leader:             []byte(lc.RaftAddr),
		LastLogIndex:       meta.Index,
		LastLogTerm:        meta.Term,
		Size:               meta.Size,
		Configuration:      raft.EncodeConfiguration(meta.Configuration),
		ConfigurationIndex: meta.ConfigurationIndex,
	}
	var resp raft.InstallSnapshotResponse
	ierr := c.trans[l].InstallSnapshot(raft.ServerID(c.cfgs[f].ID), raft.ServerAddress(c.cfgs[f].RaftAddr), req, &resp, bytes.NewReader(data))
	if resp.Success || ierr == nil || !strings.Contains(ierr.Error(), "already holds that entry") {
		t.Fatalf("InstallSnapshot(S=%d) to a follower with entries up to %d: success=%v err=%v; want a refusal", S, S+1, resp.Success, ierr)
	}
	if got := follower.RefusedSnapshots(); got != 1 {
		t.Fatalf("the follower counts %d refused snapshots, want 1", got)
	}
	var e raft.Log
	if err := follower.LogStoreForTest().GetLog(S+1, &e); err != nil {
		t.Fatalf("the follower's log lost entry %d: %v", S+1, err)
	}

	// The next commit reaches the follower, which applies S+1 (it learns
	// the commit of the new entry itself only with the one after it).
	writeEntries(t, leader, "after", 1)
	want := leader.Raft().LastIndex() - 1
	waitFor(t, opTimeout, func() bool { return follower.Raft().AppliedIndex() >= want }, "the follower applies %d", want)
}
