package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/cluster"
)

// TestWALLogStoreCluster: three real coordd processes on --raft-log-store
// wal commit, snapshot and compact; a follower killed with SIGKILL comes
// back on its own data dir and catches up; `coordd inspect` reads a
// stopped member's wal data dir; starting it with the other store, or with
// a truncated segment, is refused with one line.
func TestWALLogStoreCluster(t *testing.T) {
	walArgs := append([]string{"--raft-log-store", "wal"}, snapThresholds...)
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: walArgs})
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader := leaderIndex(t, l, c, -1)
	f := (leader + 1) % 3
	dir := l.Members()[f].DataDir
	var acked []int64
	next := int64(1)
	writeUntilSnapshots(t, ctx, c, dir, &next, &acked)
	if _, err := os.Stat(filepath.Join(dir, "wal", "wal-meta.db")); err != nil {
		t.Fatalf("the member does not keep its log in wal/: %v", err)
	}
	if err := l.Kill(f); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, coorddBinary, "inspect", "--data-dir", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Log store:") || !strings.Contains(string(out), "wal") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	// The other store is refused.
	expectRefusal(t, append(memberArgs(l, f), snapArgs...), "keeps its raft log in the wal log store, not --raft-log-store bolt")
	// A truncated segment is refused (on a copy; the original restarts).
	good := filepath.Join(t.TempDir(), "good")
	copyTree(t, dir, good)
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no segments")
	}
	if err := os.Truncate(segs[len(segs)-1], 4096); err != nil {
		t.Fatal(err)
	}
	expectRefusal(t, append(memberArgs(l, f), walArgs...), "is damaged: wal/: segment")
	copyTree(t, good, dir)
	for i := 0; i < 20; i++ { // the others commit while it is down
		if err := allocCollection(ctx, c, next); err != nil {
			t.Fatal(err)
		}
		acked, next = append(acked, next), next+1
	}
	if err := l.StartMember(f); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx, l, f)
	waitHolds(t, ctx, c.conns[f], acked, "the restarted wal member")
}
