package raftnode_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/coordd/coordd/raftnode"
)

// TestOlderSnapshotKeepsItsLog: with --trailing-logs equal to
// --snapshot-threshold and more entries than that between two snapshots
// (what a busy member's timed snapshots look like), a member whose newest
// snapshot is damaged still starts from the older one and the log after it,
// with every committed entry. raft's own compaction would have deleted
// the entries between the two snapshots, and the member would have been
// refused as damaged.
func TestOlderSnapshotKeepsItsLog(t *testing.T) {
	c := newCluster(t, 1, withConfig(func(_ int, cfg *raftnode.Config) {
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 64, time.Hour
	}))
	n := c.node(c.waitLeader())
	writeEntries(t, n, "a", 110) // both snapshot indexes have 3 digits: snapshotDirs sorts names
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n, "b", 150)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n, "c", 5)
	want := n.State().NextID()
	applied := n.State().AppliedIndex()
	dir := c.cfgs[0].DataDir
	c.stop(0)
	s := snapshotDirs(t, dir)
	flipBytes(t, filepath.Join(s[len(s)-1], "state.bin"), 10, 1)
	cfg := openCfg(dir)
	n2, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatalf("Open with a damaged newest snapshot: %v", err)
	}
	defer n2.Shutdown()
	waitFor(t, opTimeout, func() bool { return n2.State().AppliedIndex() >= applied }, "replay to index %d", applied)
	if got := n2.State().NextID(); got != want {
		t.Fatalf("after the fallback the next ID is %d, want %d", got, want)
	}
}
