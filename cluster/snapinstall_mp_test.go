package cluster_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/testutil"
)

// Multi-process restarts of members whose log a snapshot install left
// uneven. Raft leaves a follower's older entries in place when it installs
// a snapshot that lies beyond them (it compacts only trailing-logs behind
// the head), so the log has entries, a hole, then the entries after the
// snapshot. The storage check at start must accept that and every other
// shape raft itself produces; only holes above the restored snapshot are
// damage.

// bigLog makes a member keep its whole log: with thresholds this large it
// neither snapshots nor compacts, so the entries from before an installed
// snapshot stay (the shape a member with default settings has after a
// short absence).
var bigLog = []string{"--snapshot-threshold", "4096", "--trailing-logs", "4096"}

// logShape describes a stopped member's raft.db log and its newest
// finished snapshot.
type logShape struct {
	first, last, count, snap uint64
}

func (s logShape) String() string {
	return fmt.Sprintf("log %d entries in %d..%d, newest snapshot at %d", s.count, s.first, s.last, s.snap)
}

func readLogShape(t *testing.T, dir string) logShape {
	t.Helper()
	var s logShape
	db, err := bolt.Open(filepath.Join(dir, "raft.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			idx := binary.BigEndian.Uint64(k)
			if s.count == 0 {
				s.first = idx
			}
			s.last, s.count = idx, s.count+1
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range finishedSnapshots(dir) {
		var term, idx, ts uint64
		if _, err := fmt.Sscanf(filepath.Base(p), "%d-%d-%d", &term, &idx, &ts); err == nil && idx > s.snap {
			s.snap = idx
		}
	}
	return s
}

// TestRestartAfterSnapshotInstall: a follower that was down while the
// others compacted their logs catches up by a snapshot install, and then
// restarts (SIGKILL) on the uneven log that leaves; a member removed and
// re-added with a fresh data dir (docs/operations.md) catches up the same
// way and restarts too. Both hold everything acknowledged and vote again.
func TestRestartAfterSnapshotInstall(t *testing.T) {
	f := -1 // the follower under test, once known; it keeps its whole log
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: snapArgs, MemberArgs: func(i int) []string {
		if i == f {
			return bigLog
		}
		return nil
	}})
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	acked := allocCollections(t, ctx, c, 3)
	next := int64(len(acked) + 1)
	leader := leaderIndex(t, l, c, -1)
	f = (leader + 1) % 3
	m := l.Members()[f]
	restart := func(what string) {
		t.Helper()
		if err := l.StartMember(f); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitReady(ctx, f, testutil.Timeout(readyWait)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		waitHolds(t, ctx, c.conns[f], acked, what)
	}
	commit := func(n int) {
		t.Helper()
		for k := 0; k < n; k++ {
			if err := allocCollection(ctx, c, next); err != nil {
				t.Fatalf("alloc %d: %v", next, err)
			}
			acked = append(acked, next)
			next++
		}
	}

	// A lagging member: the others compact past its log while it is down.
	if err := l.Kill(f); err != nil {
		t.Fatal(err)
	}
	before := readLogShape(t, m.DataDir)
	writeUntilSnapshots(t, ctx, c, l.Members()[leader].DataDir, &next, &acked)
	restart("the lagging member after its snapshot install")
	commit(3)
	waitHolds(t, ctx, c.conns[f], acked, "the lagging member")
	if err := l.Kill(f); err != nil {
		t.Fatal(err)
	}
	got := readLogShape(t, m.DataDir)
	t.Logf("lagging member: before %v; after the install %v", before, got)
	if got.snap <= before.last+1 || got.first > before.last || got.count == got.last-got.first+1 {
		t.Fatalf("precondition: want the old entries, a hole, then the entries after an installed snapshot; before %v, after %v", before, got)
	}
	restart("the lagging member restarted on a log with a hole below its snapshot")

	// A member removed and re-added with a fresh data dir.
	if err := l.Kill(f); err != nil {
		t.Fatal(err)
	}
	if _, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.RemoveMemberResponse, error) {
		return coordpb.NewClusterClient(conn).RemoveMember(ctx, &coordpb.RemoveMemberRequest{Id: m.ID})
	}); err != nil {
		t.Fatalf("remove %s: %v", m.ID, err)
	}
	if err := os.RemoveAll(m.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(m.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	commit(40) // the leader snapshots and compacts again: the new member needs an install
	joinArgs := append([]string{"serve", "--id", m.ID, "--data-dir", m.DataDir, "--raft-addr", m.RaftAddr,
		"--grpc-addr", m.GRPCAddr, "--http-addr", m.HTTPAddr, "--join", l.Members()[leader].GRPCAddr}, append(memberArgsSec(l, f), snapArgs...)...)
	joined := startProcess(t, "re-added", coorddBinary, joinArgs...)
	waitReady(t, ctx, l, f)
	commit(3)
	waitHolds(t, ctx, c.conns[f], acked, "the re-added member")
	if err := joined.Kill(time.Minute); err != nil {
		t.Fatal(err)
	}
	got = readLogShape(t, m.DataDir)
	t.Logf("re-added member: %v", got)
	if got.snap == 0 || got.first <= 1 {
		t.Fatalf("precondition: want a re-added member that caught up by a snapshot install, have %v", got)
	}
	restart("the re-added member restarted after its snapshot install")
	// It votes: with the third member down, the leader and it commit.
	other := 3 - leader - f
	if err := l.Kill(other); err != nil {
		t.Fatal(err)
	}
	commit(1)
	waitHolds(t, ctx, c.conns[f], acked, "the re-added member (as the second voter)")
}
