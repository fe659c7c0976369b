package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
)

// Multi-process storage faults: a member's data dir is lost or damaged
// while it is down. It must refuse to start with one clear line, the healthy
// members keep committing, nothing acknowledged is lost, and no second
// cluster forms.

// snapThresholds make members snapshot every 32 entries.
var snapThresholds = []string{"--snapshot-threshold", "32", "--trailing-logs", "32", "--snapshot-interval", "100ms"}

// snapArgs run members on the bolt log store with snapThresholds: bolt
// truncates its log to --trailing-logs at each snapshot, so a member that
// falls behind gets a snapshot, and these tests damage the log in raft.db.
// (raft-wal, the default, drops only whole segments.)
var snapArgs = append(append([]string(nil), snapThresholds...), "--raft-log-store", "bolt")

// memberArgs is member i's usual command line (as the launcher builds it).
func memberArgs(l *cluster.Launcher, i int, extra ...string) []string {
	var peers []string
	for _, m := range l.Members() {
		peers = append(peers, m.ID+"="+m.RaftAddr)
	}
	m := l.Members()[i]
	args := []string{"serve", "--id", m.ID, "--data-dir", m.DataDir,
		"--raft-addr", m.RaftAddr, "--grpc-addr", m.GRPCAddr, "--http-addr", m.HTTPAddr}
	args = append(args, "--peers", strings.Join(peers, ","))
	args = append(args, memberArgsSec(l, i)...)
	return append(args, extra...)
}

// runToExit runs coordd with args and expects it to exit within 30 s; it
// returns the exit code and the output.
func runToExit(t *testing.T, args []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, coorddBinary, args...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("coordd %v did not exit within 30s: it accepted the data dir\n%s", args, tail(string(out), 15))
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// refusalLine is the member's exit message: the last output line that is
// not a log record (log lines start with a timestamp). A goroutine can log
// a moment after the message is printed (a peer's raft connection refused
// while the member exits), so the message is not always the very last line.
func refusalLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := lines[i]; l != "" && !(len(l) > 4 && l[0] >= '0' && l[0] <= '9' && l[4] == '-') {
			return l
		}
	}
	return lines[len(lines)-1]
}

// expectRefusal runs the member and checks it exits 1 with want in its
// exit message and no panic anywhere.
func expectRefusal(t *testing.T, args []string, want string) {
	t.Helper()
	code, out := runToExit(t, args)
	last := refusalLine(out)
	if code != 1 || !strings.Contains(last, want) || strings.Contains(out, "panic:") || strings.Contains(out, "fatal error:") {
		t.Fatalf("exit %d, exit message %q; want exit 1 with %q and no panic\n%s", code, last, want, tail(out, 20))
	}
}

// allocCollection commits one AllocVirtualChannels through any member and
// returns whether it was acknowledged. Right after a cluster forms, its
// leader has not created the PChannels yet: that refusal is retried.
func allocCollection(ctx context.Context, c *clients, id int64) error {
	for {
		_, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.AllocVirtualChannelsResponse, error) {
			return coordpb.NewChannelsClient(conn).AllocVirtualChannels(ctx, &coordpb.AllocVirtualChannelsRequest{
				CollectionId: id, Count: 1, RequestId: fmt.Sprintf("storage-%d", id)})
		})
		if err == nil || !strings.Contains(err.Error(), "only 0 are available") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// allocCollections commits collections 1..n through any member and fails
// the test unless each is acknowledged; it returns their IDs.
func allocCollections(t *testing.T, ctx context.Context, c *clients, n int64) []int64 {
	t.Helper()
	var acked []int64
	for id := int64(1); id <= n; id++ {
		if err := allocCollection(ctx, c, id); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, id)
	}
	return acked
}

// waitHolds waits until the member behind conn has applied every
// collection in acked; who names it in the failure.
func waitHolds(t *testing.T, ctx context.Context, conn *grpc.ClientConn, acked []int64, who string) {
	t.Helper()
	waitFor(t, ctx, who+" to hold every acknowledged collection", func() bool {
		have, err := collectionsOn(ctx, conn)
		return err == nil && len(missing(acked, have)) == 0
	})
}

// collectionsOn lists the collections member conn has applied (a stale
// read: what that member itself holds).
func collectionsOn(ctx context.Context, conn *grpc.ClientConn) (map[int64]bool, error) {
	r, err := coordpb.NewChannelsClient(conn).ListVirtualChannels(ctx, &coordpb.ListVirtualChannelsRequest{Consistency: coordpb.ReadConsistency_STALE})
	if err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	for _, col := range r.Collections {
		out[col.CollectionId] = true
	}
	return out, nil
}

// missing lists acknowledged collections a member does not hold.
func missing(acked []int64, have map[int64]bool) []int64 {
	var out []int64
	for _, id := range acked {
		if !have[id] {
			out = append(out, id)
		}
	}
	return out
}

// copyTree copies a stopped member's data dir (logs excluded).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if strings.HasSuffix(p, ".log") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

func flipAt(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	k, _ := f.ReadAt(buf, off)
	for i := range buf[:k] {
		buf[i] ^= 0xff
	}
	if _, err := f.WriteAt(buf[:k], off); err != nil {
		t.Fatal(err)
	}
}

// finishedSnapshots lists dir's snapshot directories, leaving out a
// <id>.tmp one a member killed while writing it leaves behind.
func finishedSnapshots(dir string) []string {
	all, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*"))
	var out []string
	for _, s := range all {
		if !strings.HasSuffix(s, ".tmp") {
			out = append(out, s)
		}
	}
	return out
}

// writeUntilSnapshots commits collections from *next on until member f's
// data dir holds two snapshots and a compacted log.
func writeUntilSnapshots(t *testing.T, ctx context.Context, c *clients, dir string, next *int64, acked *[]int64) {
	t.Helper()
	for k := 0; k < 600; k++ {
		if err := allocCollection(ctx, c, *next); err != nil {
			t.Fatalf("alloc %d: %v", *next, err)
		}
		*acked = append(*acked, *next)
		*next++
		if len(finishedSnapshots(dir)) >= 2 && k > 100 {
			return
		}
	}
	t.Fatalf("no two snapshots in %s after 600 entries", dir)
}

// TestDamagedOrLostStorageIsRefused: for each kind of lost or damaged
// storage (probe D1 and D11), a follower restarted on it exits 1 with one
// clear line and no panic, while the other two keep committing; restored
// from a good copy, it catches up with everything acknowledged.
func TestDamagedOrLostStorageIsRefused(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: snapArgs})
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader := leaderIndex(t, l, c, -1)
	f := (leader + 1) % 3
	dir := l.Members()[f].DataDir
	var acked []int64
	next := int64(1)
	writeUntilSnapshots(t, ctx, c, dir, &next, &acked)
	if err := l.Kill(f); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "good")
	copyTree(t, dir, good)
	db := filepath.Join(dir, "raft.db")
	snapDirs := func() []string {
		s := finishedSnapshots(dir)
		sort.Strings(s)
		return s
	}
	cases := []struct {
		name, want string
		damage     func()
	}{
		{"raft.db emptied", "has lost its raft state (raft.db is empty)", func() { os.Truncate(db, 0) }},
		{"raft.db deleted", "has lost its raft state (raft.db is missing)", func() { os.Remove(db) }},
		{"raft.db truncated to 3 pages", "is damaged: raft.db: the file is 12288 bytes", func() { os.Truncate(db, 12288) }},
		{"raft.db truncated to 1 page", "is damaged: raft.db: file size too small", func() { os.Truncate(db, 4096) }},
		{"raft.db pages bit-flipped", "is damaged: ", func() {
			fi, _ := os.Stat(db)
			for p := int64(2); p < fi.Size()/4096; p++ {
				flipAt(t, db, p*4096+16, 64)
			}
		}},
		{"raft.db meta pages bit-flipped", "is damaged: raft.db", func() { flipAt(t, db, 20, 32); flipAt(t, db, 4096+20, 32) }},
		{"snapshots deleted", "is damaged: the log starts at index", func() { os.RemoveAll(filepath.Join(dir, "snapshots")) }},
		{"snapshot meta garbled", "is damaged: none of the", func() {
			for _, s := range snapDirs() {
				os.WriteFile(filepath.Join(s, "meta.json"), []byte("garbage"), 0o600)
			}
		}},
		{"every snapshot bit-flipped", "CRC mismatch", func() {
			for _, s := range snapDirs() {
				flipAt(t, filepath.Join(s, "state.bin"), 8, 1)
			}
		}},
	}
	for _, tc := range cases {
		copyTree(t, good, dir)
		tc.damage()
		expectRefusal(t, append(memberArgs(l, f), snapArgs...), tc.want)
		// The healthy majority keeps committing meanwhile.
		if err := allocCollection(ctx, c, next); err != nil {
			t.Fatalf("%s: commit on the healthy members: %v", tc.name, err)
		}
		acked = append(acked, next)
		next++
		t.Logf("%s: refused; the others committed collection %d", tc.name, next-1)
	}
	copyTree(t, good, dir)
	if err := l.StartMember(f); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ctx, l, f)
	waitHolds(t, ctx, c.conns[f], acked, "the restored member")
}

// TestLostRaftStateOnTwoMembersDoesNotFork is probe D1's worst case: every
// member stops, two lose raft.db. They refuse to start; the intact member
// alone neither serves a new, empty cluster nor loses its state; restoring
// the two data dirs from a copy brings everything back.
func TestLostRaftStateOnTwoMembersDoesNotFork(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{})
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	acked := allocCollections(t, ctx, c, 5)
	before, err := status0(ctx, c.conns[2])
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := l.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	backup := t.TempDir()
	for _, i := range []int{0, 1} {
		dir := l.Members()[i].DataDir
		copyTree(t, dir, filepath.Join(backup, l.Members()[i].ID))
		if err := os.Truncate(filepath.Join(dir, "raft.db"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The intact member first, so a re-bootstrap would find it running.
	if err := l.StartMember(2); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		expectRefusal(t, memberArgs(l, i), "has lost its raft state (raft.db is empty)")
	}
	// No cluster formed: the intact member has no leader, and its log
	// still reaches every entry it had (without a leader it applies none,
	// so its state is checked again once the cluster is back).
	time.Sleep(2 * time.Second) // several election timeouts: nothing must happen
	// Asked with the server certificate: without a leader the restarted
	// member has not replayed its log, so it knows no token yet.
	st, err := status0(ctx, dialAsServer(t, l, l.Members()[2].GRPCAddr))
	if err != nil {
		t.Fatal(err)
	}
	if st.State == "Leader" || st.LeaderId != "" {
		t.Fatalf("a cluster formed around the intact member: state %s, leader %q", st.State, st.LeaderId)
	}
	if st.LastLogIndex < before.AppliedIndex {
		t.Fatalf("intact member's log ends at %d, it had applied %d", st.LastLogIndex, before.AppliedIndex)
	}
	// Restore the two data dirs from the copy: the cluster comes back whole.
	for _, i := range []int{0, 1} {
		copyTree(t, filepath.Join(backup, l.Members()[i].ID), l.Members()[i].DataDir)
		if err := l.StartMember(i); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		waitReady(t, ctx, l, i)
	}
	if err := allocCollection(ctx, c, 6); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, 6)
	for i := 0; i < 3; i++ {
		waitHolds(t, ctx, c.conns[i], acked, fmt.Sprintf("member %d", i))
	}
}

// TestReplaceMemberThatLostItsDisk follows docs/operations.md: a follower
// loses its whole data dir. Restarted with --peers it refuses to bootstrap
// beside its running peers; started with --join before being removed it is
// refused; removed, then started with an empty data dir and --join, it
// becomes a voter again, holds everything, and counts toward the quorum.
func TestReplaceMemberThatLostItsDisk(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{})
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	acked := allocCollections(t, ctx, c, 5)
	leader := leaderIndex(t, l, c, -1)
	f := (leader + 1) % 3
	other := 3 - leader - f
	m := l.Members()[f]
	if err := l.Kill(f); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(m.DataDir); err != nil {
		t.Fatal(err)
	}
	expectRefusal(t, memberArgs(l, f), "already belongs to cluster")
	os.RemoveAll(m.DataDir)
	joinArgs := append([]string{"serve", "--id", m.ID, "--data-dir", m.DataDir, "--raft-addr", m.RaftAddr,
		"--grpc-addr", m.GRPCAddr, "--http-addr", m.HTTPAddr, "--join", l.Members()[leader].GRPCAddr}, memberArgsSec(l, f)...)
	expectRefusal(t, joinArgs, "is already in the cluster but its data dir never joined it")

	if _, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.RemoveMemberResponse, error) {
		return coordpb.NewClusterClient(conn).RemoveMember(ctx, &coordpb.RemoveMemberRequest{Id: m.ID})
	}); err != nil {
		t.Fatalf("remove %s: %v", m.ID, err)
	}
	os.RemoveAll(m.DataDir)
	if err := os.MkdirAll(m.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	startProcess(t, "replacement", coorddBinary, joinArgs...)
	waitReady(t, ctx, l, f)
	waitHolds(t, ctx, c.conns[f], acked, "the replacement")
	// The replacement is a voter: with another member down, the leader and
	// the replacement still commit.
	if err := l.Kill(other); err != nil {
		t.Fatal(err)
	}
	if err := allocCollection(ctx, c, 6); err != nil {
		t.Fatalf("commit with the replacement as the second voter: %v", err)
	}
	acked = append(acked, 6)
	waitHolds(t, ctx, c.conns[f], acked, "the replacement (with the new entry)")
}
