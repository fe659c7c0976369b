package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/proc"
	"github.com/coordd/coordd/testutil"
)

// coorddBinary, streamingBinary and coordctlBinary are built once per test binary by
// TestMain.
var coorddBinary, streamingBinary, coordctlBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "coordd-mp-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	coorddBinary = filepath.Join(dir, "coordd")
	streamingBinary = filepath.Join(dir, "streamingnode")
	coordctlBinary = filepath.Join(dir, "coordctl")
	for bin, pkg := range map[string]string{coorddBinary: "./cmd/coordd", streamingBinary: "./cmd/streamingnode", coordctlBinary: "./cmd/coordctl"} {
		build := exec.Command("go", "build", "-tags", "hashicorpmetrics", "-o", bin, "github.com/coordd/coordd/"+pkg[2:])
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg, err)
			os.Exit(1)
		}
	}
	// Secure by default (testpki_test.go): one throwaway CA for the run.
	if !insecureRequested() {
		if pki, err = newTestPKI(filepath.Join(dir, "pki")); err != nil {
			fmt.Fprintln(os.Stderr, "test PKI:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startCluster launches a three-process cluster and stops it at cleanup,
// keeping member logs on failure.
func startCluster(t *testing.T) *cluster.Launcher {
	t.Helper()
	return startClusterWith(t, cluster.LauncherConfig{})
}

// startClusterWith launches three members (and cfg.StreamingNodes
// streaming nodes) with cfg's extra arguments, secure with the test PKI
// unless cfg brings its own security or the run is insecure
// (COORDD_TEST_INSECURE=1).
func startClusterWith(t *testing.T, cfg cluster.LauncherConfig) *cluster.Launcher {
	t.Helper()
	if cfg.Security == nil && pki != nil {
		cfg.Security = pki.launch()
	}
	return launch(t, cfg)
}

// startInsecureClusterWith is startClusterWith with --insecure: for the
// tests that are about plaintext (the explicit insecure variant).
func startInsecureClusterWith(t *testing.T, cfg cluster.LauncherConfig) *cluster.Launcher {
	t.Helper()
	cfg.Security = nil
	return launch(t, cfg)
}

func launch(t *testing.T, cfg cluster.LauncherConfig) *cluster.Launcher {
	t.Helper()
	cfg.Binary, cfg.StreamingBinary = coorddBinary, streamingBinary
	cfg.DataDir, cfg.Nodes, cfg.BasePort, cfg.Host = t.TempDir(), 3, freeBasePort(t, 3), "127.0.0.1"
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = testutil.Timeout(readyWait)
	}
	l := cluster.NewLauncher(cfg)
	// Registered before Start, so a cluster that never became ready keeps
	// the logs its failure names (evidence_test.go).
	t.Cleanup(func() {
		l.Stop()
		keepEvidence(t, launcherLogs(l))
	})
	// The members start together: the last one's wait is mostly over when
	// the first one is ready.
	ctx, cancel := context.WithTimeout(context.Background(), 2*cfg.ReadyTimeout)
	defer cancel()
	if err := l.Start(ctx); err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	if cfg.Security == nil || ours(l) {
		waitServing(t, l)
	}
	return l
}

// waitServing waits until every member answers a read of the PChannels
// the leader creates once it is established: before that a broadcast is
// refused ("no control channel yet"), which is startup, not what a test
// means to observe. Readiness (Launcher.Start) already covers raft and the
// leader's registered address.
func waitServing(t *testing.T, l *cluster.Launcher) {
	t.Helper()
	c := dialAll(t, l)
	for i, conn := range c.conns {
		testutil.EventuallyEvery(t, 30*time.Second, 50*time.Millisecond, "member "+l.Members()[i].ID+" to list the PChannels", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			resp, err := coordpb.NewChannelsClient(conn).ListPChannels(ctx, &coordpb.ListPChannelsRequest{})
			return err == nil && len(resp.Pchannels) > 0
		})
	}
}

// startProcess starts one more process (outside the launcher) with proc,
// its output in a log under t.TempDir; cleanup kills it and, when the test
// failed, prints the log's tail.
func startProcess(t *testing.T, name, path string, args ...string) *proc.Child {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	c, err := proc.Start(proc.Spec{Name: name, Path: path, Args: args, Log: log, DieWithParent: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Kill(time.Minute); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		keepEvidence(t, []processLog{{name, log}})
	})
	return c
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clients holds one connection per member.
type clients struct {
	conns []*grpc.ClientConn
}

func dialAll(t *testing.T, l *cluster.Launcher) *clients {
	t.Helper()
	c := &clients{}
	for _, m := range l.Members() {
		conn, err := grpc.NewClient(m.GRPCAddr, dialOptions(l)...)
		if err != nil {
			t.Fatal(err)
		}
		c.conns = append(c.conns, conn)
	}
	t.Cleanup(func() {
		for _, conn := range c.conns {
			conn.Close()
		}
	})
	return c
}

// anyMember tries call on each member in turn until one succeeds or ctx
// ends; Unavailable and connection failures move on to the next member.
func anyMember[T any](ctx context.Context, c *clients, call func(context.Context, *grpc.ClientConn) (T, error)) (T, error) {
	var zero T
	var last error
	for attempt := 0; ; attempt++ {
		for _, conn := range c.conns {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			v, err := call(cctx, conn)
			cancel()
			if err == nil {
				return v, nil
			}
			last = err
			if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
				return zero, err
			}
		}
		select {
		case <-ctx.Done():
			return zero, fmt.Errorf("no member answered: %v (last: %v)", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func status0(ctx context.Context, conn *grpc.ClientConn) (*coordpb.StatusResponse, error) {
	return coordpb.NewClusterClient(conn).Status(ctx, &coordpb.StatusRequest{})
}

// leaderIndex returns the launcher index of the current leader.
func leaderIndex(t *testing.T, l *cluster.Launcher, c *clients, skip int) int {
	t.Helper()
	leader := -1
	testutil.EventuallyEvery(t, 15*time.Second, 20*time.Millisecond, "an established leader", func() bool {
		for i, conn := range c.conns {
			if i == skip {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := status0(ctx, conn)
			cancel()
			if err == nil && st.State == "Leader" && st.EstablishedTerm == st.Term {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// op is one completed allocation, with its real-time window.
type op struct {
	kind         string // "ts" or "id"
	invoke, done time.Time
	first, last  uint64
}

// TestKillLeaderAllocationsStayMonotonic is the multi-process
// scenario: three coordd processes; allocations run throughout; the leader
// is SIGKILLed, a write succeeds on the new leader, the killed member is
// restarted and catches up. Every allocation must be unique and strictly
// greater than everything completed before it was invoked.
func TestKillLeaderAllocationsStayMonotonic(t *testing.T) {
	checkAllocations(t, killLeaderUnderAllocations(t, startCluster(t)))
}

// TestBrokenIDAllocatorIsCaught is a test of the test: with the ID
// allocator deliberately broken (no committed reservation), the same
// scenario must produce a violation the checker reports.
func TestBrokenIDAllocatorIsCaught(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: []string{"--test-only-unsafe-id-reuse"}})
	err := allocationViolation(killLeaderUnderAllocations(t, l))
	if err == nil {
		t.Fatal("the checker found no violation in a build that reuses IDs after failover")
	}
	t.Logf("caught, as it should be: %v", err)
}

// killLeaderUnderAllocations runs allocations throughout a leader SIGKILL,
// a write on the new leader and the killed member's restart, and returns
// every completed allocation.
func killLeaderUnderAllocations(t *testing.T, l *cluster.Launcher) []op {
	c := dialAll(t, l)

	var mu sync.Mutex
	var ops []op
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 100000; i++ {
				kind := "ts"
				if (w+i)%2 == 1 {
					kind = "id"
				}
				invoke := time.Now()
				var first uint64
				var count uint32 = uint32(1 + i%3)
				var err error
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if kind == "ts" {
					var r *coordpb.AllocTimestampResponse
					r, err = anyMember(actx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.AllocTimestampResponse, error) {
						return coordpb.NewAllocatorClient(conn).AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: count})
					})
					if err == nil {
						first = r.First
					}
				} else {
					var r *coordpb.AllocIDResponse
					r, err = anyMember(actx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.AllocIDResponse, error) {
						return coordpb.NewAllocatorClient(conn).AllocID(ctx, &coordpb.AllocIDRequest{Count: count})
					})
					if err == nil {
						first = r.First
					}
				}
				cancel()
				if err != nil {
					continue // failed or unknown: it constrains nothing
				}
				mu.Lock()
				ops = append(ops, op{kind: kind, invoke: invoke, done: time.Now(), first: first, last: first + uint64(count) - 1})
				mu.Unlock()
			}
		}()
	}

	time.Sleep(500 * time.Millisecond)
	leader := leaderIndex(t, l, c, -1)
	killedAt := time.Now()
	if err := l.Kill(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed leader %s", l.Members()[leader].ID)

	// A write (an ID allocation commits a reservation on a new leader)
	// succeeds through the survivors.
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	_, err := anyMember(wctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.AllocIDResponse, error) {
		return coordpb.NewAllocatorClient(conn).AllocID(ctx, &coordpb.AllocIDRequest{Count: 1})
	})
	wcancel()
	if err != nil {
		t.Fatalf("no write succeeded after killing the leader: %v", err)
	}
	t.Logf("first write after kill: %v", time.Since(killedAt))
	newLeader := leaderIndex(t, l, c, leader)
	if newLeader == leader {
		t.Fatal("killed member still reported as leader")
	}

	time.Sleep(500 * time.Millisecond)
	if err := l.StartMember(leader); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), testutil.Timeout(readyWait))
	defer rcancel()
	waitReady(t, rctx, l, leader)
	time.Sleep(500 * time.Millisecond)
	stop()
	wg.Wait()

	// The restarted member catches up to the leader's commit index.
	lst, err := status0(rctx, c.conns[newLeader])
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := status0(rctx, c.conns[leader])
		if err == nil && st.AppliedIndex >= lst.CommitIndex && st.LeaderId != "" {
			if st.Term < lst.Term {
				t.Fatalf("restarted member at term %d, leader at %d", st.Term, lst.Term)
			}
			break
		}
		if rctx.Err() != nil {
			t.Fatalf("restarted member did not catch up to index %d: %v %v", lst.CommitIndex, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ops
}

// checkAllocations fails the test on any allocation violation.
func checkAllocations(t *testing.T, ops []op) {
	t.Helper()
	if err := allocationViolation(ops); err != nil {
		t.Fatal(err)
	}
	t.Logf("checked %d allocations", len(ops))
}

// allocationViolation: per kind, values are unique, and an allocation that
// began after another completed is strictly greater than all of it.
func allocationViolation(ops []op) error {
	for _, kind := range []string{"ts", "id"} {
		var ks []op
		for _, o := range ops {
			if o.kind == kind {
				ks = append(ks, o)
			}
		}
		if len(ks) < 20 {
			return fmt.Errorf("only %d %s allocations completed; the test exercised nothing", len(ks), kind)
		}
		sort.Slice(ks, func(i, j int) bool { return ks[i].first < ks[j].first })
		for i := 1; i < len(ks); i++ {
			if ks[i].first <= ks[i-1].last {
				return fmt.Errorf("%s ranges overlap: [%d,%d] and [%d,%d]", kind, ks[i-1].first, ks[i-1].last, ks[i].first, ks[i].last)
			}
		}
		byDone := append([]op(nil), ks...)
		sort.Slice(byDone, func(i, j int) bool { return byDone[i].done.Before(byDone[j].done) })
		for _, o := range ks {
			for _, p := range byDone {
				if !p.done.Before(o.invoke) {
					break
				}
				if o.first <= p.last {
					return fmt.Errorf("%s allocation [%d,%d] invoked at %v is not above [%d,%d] completed at %v",
						kind, o.first, o.last, o.invoke, p.first, p.last, p.done)
				}
			}
		}
	}
	return nil
}
