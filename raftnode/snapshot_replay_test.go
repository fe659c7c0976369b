package raftnode_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// TestReplayedSnapshotIsRefused: with fault injection, a follower that
// caught up by InstallSnapshot and applied more gets that snapshot again
// (ReplaySnapshot, as an overtaken stream delivers it) and refuses it on
// both log stores; it keeps applying, its state the leader's.
func TestReplayedSnapshotIsRefused(t *testing.T) {
	for _, store := range []string{datadir.LogStoreBolt, datadir.LogStoreWAL} {
		t.Run(store, func(t *testing.T) {
			c := newCluster(t, 3, withConfig(func(i int, cfg *raftnode.Config) {
				smallSnapshots(i, cfg)
				cfg.LogStore, cfg.WALSegmentSize = store, walSegmentSize
				cfg.FaultInjection = true
				// One leader throughout, also on a loaded machine.
				cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, time.Second
			}))
			l := c.waitLeader()
			leader := c.node(l)
			f := (l + 1) % 3
			lagger := c.node(f)
			if _, err := lagger.ReplaySnapshot(opTimeout); !errors.Is(err, raftnode.ErrNoSnapshotReceived) {
				t.Fatalf("replay before any snapshot: %v, want ErrNoSnapshotReceived", err)
			}
			c.isolate(f)
			writeEntries(t, leader, "while-lagging", 300)
			if err := leader.Snapshot(); err != nil {
				t.Fatal(err)
			}
			c.heal(f)
			c.waitConverged(0, 1, 2)
			writeEntries(t, leader, "after-install", 20)
			c.waitConverged(0, 1, 2)

			got, err := lagger.ReplaySnapshot(opTimeout)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if !got.Refused || !strings.Contains(got.Answer, "coordd member refused the snapshot") {
				t.Fatalf("replayed snapshot at %d (applied %d, last %d): %+v, want a refusal", got.Index, got.Applied, got.Last, got)
			}
			if lagger.RefusedSnapshots() == 0 {
				t.Fatal("the refusal is not counted")
			}
			writeEntries(t, leader, "after-replay", 20)
			c.waitConverged(0, 1, 2)
		})
	}
}
