package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/commands/logpb"
)

// Backups and quorum loss with real processes (docs/operations.md#backup-and-restore,
// docs/operations.md#quorum-loss).

// startMemberProc starts coordd with args the launcher does not build (a
// member that joins, or one seeded by restore), logging to logPath; it is
// SIGKILLed when the test ends.
func startMemberProc(t *testing.T, args []string, logPath string) *exec.Cmd {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(coorddBinary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		logf.Close()
		keepEvidence(t, []processLog{{filepath.Base(logPath), logPath}})
	})
	return cmd
}

// serveArgs is member m's command line without --peers or --join.
func serveArgs(m cluster.LocalMember, extra ...string) []string {
	return append([]string{"serve", "--id", m.ID, "--data-dir", m.DataDir, "--raft-addr", m.RaftAddr,
		"--grpc-addr", m.GRPCAddr, "--http-addr", m.HTTPAddr}, extra...)
}

// runTool runs coordd or coordctl to completion and returns its exit code
// and combined output.
func runTool(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish", filepath.Base(bin), args)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// load commits collections and allocates IDs through any member until
// stopped, recording what was acknowledged.
type load struct {
	mu       sync.Mutex
	acked    []int64 // acknowledged collection IDs
	maxID    uint64  // highest acknowledged allocated ID
	maxTS    uint64  // highest acknowledged timestamp
	next     int64
	stop     chan struct{}
	done     chan struct{}
	firstErr error
}

func startLoad(ctx context.Context, c *clients, firstCollection int64) *load {
	ld := &load{next: firstCollection, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ld.done)
		for {
			select {
			case <-ld.stop:
				return
			default:
			}
			if err := ld.step(ctx, c); err != nil {
				ld.mu.Lock()
				ld.firstErr = err
				ld.mu.Unlock()
				return
			}
		}
	}()
	return ld
}

func (ld *load) step(ctx context.Context, c *clients) error {
	id := ld.next
	ld.next++
	if err := allocCollection(ctx, c, id); err != nil {
		return fmt.Errorf("collection %d: %w", id, err)
	}
	ids, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.AllocIDResponse, error) {
		return coordpb.NewAllocatorClient(conn).AllocID(ctx, &coordpb.AllocIDRequest{Count: 3})
	})
	if err != nil {
		return fmt.Errorf("alloc ID: %w", err)
	}
	ts, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.AllocTimestampResponse, error) {
		return coordpb.NewAllocatorClient(conn).AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: 1})
	})
	if err != nil {
		return fmt.Errorf("alloc timestamp: %w", err)
	}
	ld.mu.Lock()
	ld.acked = append(ld.acked, id)
	ld.maxID = max(ld.maxID, ids.First+uint64(ids.Count)-1)
	ld.maxTS = max(ld.maxTS, ts.First)
	ld.mu.Unlock()
	return nil
}

// snapshot returns a copy of what has been acknowledged so far.
func (ld *load) snapshot() (acked []int64, maxID, maxTS uint64) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return append([]int64(nil), ld.acked...), ld.maxID, ld.maxTS
}

func (ld *load) halt(t *testing.T) {
	t.Helper()
	close(ld.stop)
	<-ld.done
	if ld.firstErr != nil {
		t.Fatalf("load: %v", ld.firstErr)
	}
}

// checkAllocatorsAhead allocates an ID and a timestamp and checks both are
// above everything acknowledged before.
func checkAllocatorsAhead(t *testing.T, ctx context.Context, c *clients, maxID, maxTS uint64) {
	t.Helper()
	ids, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.AllocIDResponse, error) {
		return coordpb.NewAllocatorClient(conn).AllocID(ctx, &coordpb.AllocIDRequest{Count: 1})
	})
	if err != nil || ids.First <= maxID {
		t.Fatalf("AllocID after recovery: %v (first %d, highest acknowledged before %d)", err, ids.GetFirst(), maxID)
	}
	ts, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.AllocTimestampResponse, error) {
		return coordpb.NewAllocatorClient(conn).AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: 1})
	})
	if err != nil || ts.First <= maxTS {
		t.Fatalf("AllocTimestamp after recovery: %v (got %d, highest acknowledged before %d)", err, ts.GetFirst(), maxTS)
	}
}

// clusterLocal are the snapshot tables a new cluster rewrites for itself:
// who leads, which members exist, how far the allocators reserved, and the
// channels meta, whose assignment version a new leader restarts (it is
// compared without it).
var clusterLocal = map[string]bool{"leadership": true, "member": true, "allocator": true, "channels_meta": true}

// sameChannelsMeta compares the channels meta of two states, apart from the
// version a new leader restarts.
func sameChannelsMeta(t *testing.T, a, b io.Reader) {
	t.Helper()
	sa, err := backup.Validate(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := backup.Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	ma, mb := proto.Clone(sa.ChannelsMeta()).(*logpb.ChannelsMeta), proto.Clone(sb.ChannelsMeta()).(*logpb.ChannelsMeta)
	ma.VersionLocal, mb.VersionLocal = 0, 0
	if !proto.Equal(ma, mb) {
		t.Errorf("channels meta: new cluster %v, backup %v", mb, ma)
	}
}

// TestBackupUnderLoadRestoresIntoNewCluster: `coordctl snapshot save` runs
// while writes are acknowledged; the backup verifies, holds every write
// acknowledged before the save began, seeds a new three-member cluster
// (`coordd restore` on one member, --join on the others) whose first member
// holds the backup's state byte for byte, and whose state, saved again,
// has the same tables as the backup (apart from the cluster-local ones).
// A corrupt copy is refused by inspect and restore.
func TestBackupUnderLoadRestoresIntoNewCluster(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: snapArgs})
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ld := startLoad(ctx, c, 1)
	waitFor(t, ctx, "20 acknowledged writes", func() bool { a, _, _ := ld.snapshot(); return len(a) >= 20 })

	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	ackedBefore, maxIDBefore, maxTSBefore := ld.snapshot()
	start := time.Now()
	code, out := runTool(t, coordctlBinary, append(ctlArgs(l), "snapshot", "save", file)...)
	t.Logf("snapshot save under load took %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	if code != 0 {
		t.Fatalf("snapshot save: exit %d: %s", code, out)
	}
	waitFor(t, ctx, "more writes after the save", func() bool { a, _, _ := ld.snapshot(); return len(a) >= len(ackedBefore)+5 })
	ld.halt(t)
	_, maxIDAfter, maxTSAfter := ld.snapshot() // handed out by the old cluster after the backup

	if code, out := runTool(t, coordctlBinary, "snapshot", "inspect", file); code != 0 || !strings.Contains(out, "(ok)") {
		t.Fatalf("snapshot inspect: exit %d: %s", code, out)
	}
	corrupt := filepath.Join(dir, "corrupt.snap")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup file: %d bytes", len(data))
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(corrupt, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := runTool(t, coordctlBinary, "snapshot", "inspect", corrupt); code != 1 || !strings.Contains(out, "SHA-256 mismatch") {
		t.Fatalf("inspect of a corrupt backup: exit %d: %s", code, out)
	}
	l.Stop() // the old cluster is gone; the new one reuses nothing of it
	// --id-floor as the docs say: the highest next ID of the old members.
	var idFloor uint64
	for _, m := range l.Members() {
		code, out := runTool(t, coorddBinary, "inspect", "--json", "--data-dir", m.DataDir)
		var rep struct {
			NextID uint64 `json:"allocator_next_id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("inspect %s: exit %d: %s", m.ID, code, out)
		}
		idFloor = max(idFloor, rep.NextID)
	}
	floorArg := strconv.FormatUint(idFloor, 10)

	// The new cluster: fresh ports and data dirs.
	plan := cluster.NewLauncher(cluster.LauncherConfig{DataDir: t.TempDir(), Nodes: 3, BasePort: freeBasePort(t, 3), Host: "127.0.0.1",
		Security: l.Security()}) // the restored state holds the source's tokens
	ms := plan.Members()
	if code, out := runTool(t, coorddBinary, "restore", "--snapshot", corrupt, "--data-dir", ms[0].DataDir, "--id", ms[0].ID, "--raft-addr", ms[0].RaftAddr, "--id-floor", floorArg); code != 1 ||
		!strings.Contains(out, "SHA-256 mismatch") {
		t.Fatalf("restore of a corrupt backup: exit %d: %s", code, out)
	}
	if code, out := runTool(t, coorddBinary, "restore", "--snapshot", file, "--data-dir", ms[0].DataDir, "--id", ms[0].ID, "--raft-addr", ms[0].RaftAddr, "--id-floor", floorArg); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	if code, out := runTool(t, coorddBinary, "inspect", "--data-dir", ms[0].DataDir); code != 0 || !regexp.MustCompile(`Log store:\s+wal`).MatchString(out) {
		t.Fatalf("inspect of the restored data dir: exit %d, want the default log store (wal): %s", code, out)
	}
	bf, err := backup.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	body, err := io.ReadAll(bf.Body())
	if err != nil {
		t.Fatal(err)
	}
	states, _ := filepath.Glob(filepath.Join(ms[0].DataDir, "snapshots", "*", "state.bin"))
	if len(states) != 1 {
		t.Fatalf("restored snapshots: %v", states)
	}
	if got, err := os.ReadFile(states[0]); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("the restored member's snapshot is not the backup's state byte for byte (%v)", err)
	}

	logs := t.TempDir()
	// restore and serve both take the default log store (raft-wal for a
	// new data dir): the restored member serves the store restore recorded.
	startMemberProc(t, serveArgs(ms[0], append(memberArgsSec(plan, 0), snapThresholds...)...), filepath.Join(logs, "n1.log"))
	waitReady(t, ctx, plan, 0)
	if out, err := os.ReadFile(filepath.Join(logs, "n1.log")); err != nil || !strings.Contains(string(out), "log_store=wal") {
		t.Fatalf("the restored member's log does not say it serves the wal log store (%v):\n%s", err, out)
	}
	for i := 1; i < 3; i++ {
		startMemberProc(t, serveArgs(ms[i], append(append(memberArgsSec(plan, i), snapThresholds...), "--join", ms[0].GRPCAddr)...), filepath.Join(logs, ms[i].ID+".log"))
		waitReady(t, ctx, plan, i)
	}
	nc := dialAll(t, plan)
	for i := range ms {
		waitFor(t, ctx, ms[i].ID+" to hold every write acknowledged before the save", func() bool {
			have, err := collectionsOn(ctx, nc.conns[i])
			return err == nil && len(missing(ackedBefore, have)) == 0
		})
	}
	st, err := status0(ctx, nc.conns[0])
	if err != nil || len(st.Members) != 3 {
		t.Fatalf("new cluster members: %v %v", st.GetMembers(), err)
	}
	checkAllocatorsAhead(t, ctx, nc, max(maxIDBefore, maxIDAfter), max(maxTSBefore, maxTSAfter))

	// Saved again from the new cluster: the same tables.
	again := filepath.Join(dir, "again.snap")
	if code, out := runTool(t, coordctlBinary, append(ctlArgs(plan), "snapshot", "save", again)...); code != 0 {
		t.Fatalf("save from the new cluster: %s", out)
	}
	ab, err := backup.Open(again)
	if err != nil {
		t.Fatal(err)
	}
	defer ab.Close()
	want, err := backup.Summarize(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := backup.Summarize(ab.Body())
	if err != nil {
		t.Fatal(err)
	}
	if ab.Header.ClusterID == bf.Header.ClusterID || ab.Header.Index <= bf.Header.Index {
		t.Fatalf("new cluster's backup: cluster %s index %d; the old: cluster %s index %d", ab.Header.ClusterID, ab.Header.Index, bf.Header.ClusterID, bf.Header.Index)
	}
	sameChannelsMeta(t, bytes.NewReader(body), ab.Body())
	for _, w := range want.Tables {
		if clusterLocal[w.Name] {
			continue
		}
		if g := got.Table(w.Name); g != w {
			t.Errorf("table %s: new cluster %+v, backup %+v", w.Name, g, w)
		}
	}
}

// TestQuorumLossRecoverSurvivorAndRegrow follows docs/operations.md#quorum-loss:
// three members acknowledge writes; all are SIGKILLed and two lose their
// data dirs; the survivor is inspected, recovered as a one-member cluster
// with `coordd recover`, restarted, and the cluster is regrown to three by
// members with empty data dirs that --join it. No acknowledged write is
// lost, the allocators never go backwards, and the regrown cluster commits
// without the survivor.
func TestQuorumLossRecoverSurvivorAndRegrow(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: snapArgs})
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ld := startLoad(ctx, c, 1)
	waitFor(t, ctx, "40 acknowledged writes", func() bool { a, _, _ := ld.snapshot(); return len(a) >= 40 })
	ld.halt(t)
	acked, maxID, maxTS := ld.snapshot()

	leader := leaderIndex(t, l, c, -1)
	s := (leader + 1) % 3 // the survivor is a follower
	ms := l.Members()
	waitFor(t, ctx, "the survivor to hold every acknowledged write", func() bool {
		have, err := collectionsOn(ctx, c.conns[s])
		return err == nil && len(missing(acked, have)) == 0
	})
	if code, out := runTool(t, coorddBinary, "inspect", "--data-dir", ms[s].DataDir); code != 1 || !strings.Contains(out, "is in use by another process") {
		t.Fatalf("inspect of a running member: exit %d: %s", code, out)
	}
	for i := range ms {
		if err := l.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ms {
		if i != s {
			if err := os.RemoveAll(ms[i].DataDir); err != nil {
				t.Fatal(err)
			}
		}
	}

	code, out := runTool(t, coorddBinary, "inspect", "--data-dir", ms[s].DataDir)
	t.Logf("survivor before recovery:\n%s", out)
	if code != 0 || strings.Count(out, "(voter)") != 3 {
		t.Fatalf("inspect of the survivor: exit %d: %s", code, out)
	}
	peers := filepath.Join(t.TempDir(), "peers.json")
	if err := os.WriteFile(peers, []byte(fmt.Sprintf(`[{"id": %q, "address": %q}]`, ms[s].ID, ms[s].RaftAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := runTool(t, coorddBinary, "recover", "--data-dir", ms[s].DataDir, "--peers-file", peers); code != 0 {
		t.Fatalf("recover: exit %d: %s", code, out)
	}
	if err := l.StartMember(s); err != nil { // its --peers is ignored: it has raft state
		t.Fatal(err)
	}
	waitReady(t, ctx, l, s)
	waitFor(t, ctx, "the survivor to lead alone and hold every acknowledged write", func() bool {
		st, err := status0(ctx, c.conns[s])
		if err != nil || st.State != "Leader" || len(st.Members) != 1 {
			return false
		}
		have, err := collectionsOn(ctx, c.conns[s])
		return err == nil && len(missing(acked, have)) == 0
	})
	checkAllocatorsAhead(t, ctx, c, maxID, maxTS)
	if err := allocCollection(ctx, c, 1000); err != nil {
		t.Fatalf("write on the recovered survivor: %v", err)
	}
	acked = append(acked, 1000)

	// Regrow: the lost members come back with empty data dirs and --join.
	logs := t.TempDir()
	for i := range ms {
		if i == s {
			continue
		}
		startMemberProc(t, serveArgs(ms[i], append(append(memberArgsSec(l, i), snapArgs...), "--join", ms[s].GRPCAddr)...), filepath.Join(logs, ms[i].ID+".log"))
		waitReady(t, ctx, l, i)
	}
	for i := range ms {
		waitFor(t, ctx, ms[i].ID+" to hold every acknowledged write", func() bool {
			have, err := collectionsOn(ctx, c.conns[i])
			return err == nil && len(missing(acked, have)) == 0
		})
	}
	st, err := status0(ctx, c.conns[s])
	if err != nil || len(st.Members) != 3 {
		t.Fatalf("members after regrowing: %v %v", st.GetMembers(), err)
	}
	for _, m := range st.Members {
		if m.Suffrage != "voter" {
			t.Fatalf("member %s is a %s", m.Id, m.Suffrage)
		}
	}
	// The regrown members form a quorum of their own.
	if err := l.Kill(s); err != nil {
		t.Fatal(err)
	}
	if err := allocCollection(ctx, c, 1001); err != nil {
		t.Fatalf("write without the survivor: %v", err)
	}
	checkAllocatorsAhead(t, ctx, c, maxID, maxTS)
}
