// Package harness runs a real coordd cluster for Jepsen-style tests: N
// coordd processes on loopback, each on its own 127.x.y.z address, with
// every directed raft link (i dials j) going through a fault proxy in the
// test process (coordd --raft-dial), fresh data dirs, and teardown of every
// process by PID when the test ends, whether it passed or not.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/proxy"
)

// Ports used on each member's own loopback address.
const (
	grpcPort = 17000
	raftPort = 17100
	httpPort = 17200
)

// Config describes a cluster.
type Config struct {
	Nodes int // 3 or 5
	// Seed seeds the proxies' jitter (the schedule has its own seed).
	Seed uint64
	// Raft timing; zero means coordd's defaults (250ms/250ms/200ms).
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// ExtraArgs are appended to every member's command line (e.g.
	// --snapshot-threshold 64).
	ExtraArgs []string
	// LogLevel of the members; default "info" (JEPSEN_LOG_LEVEL overrides).
	LogLevel string
	// Dir holds the members' data dirs; default t.TempDir().
	Dir string
}

// Member is one coordd member's addresses and files.
type Member struct {
	ID, Host, RaftAddr, GRPCAddr, HTTPAddr, DataDir, LogPath string
}

// ProcState is what the harness did last to a member's process.
type ProcState int

const (
	Stopped ProcState = iota
	Running
	Paused
)

func (s ProcState) String() string {
	return [...]string{"stopped", "running", "paused"}[s]
}

// Exit is a process exit the harness did not ask for (a crash).
type Exit struct {
	Member string `json:"member"`
	At     int64  `json:"at_ns"`
	Err    string `json:"error"`
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Cluster is a running coordd cluster.
type Cluster struct {
	t       testing.TB
	cfg     Config
	bin     Binaries
	t0      time.Time
	members []Member
	links   [][]*proxy.Proxy // links[i][j]: i dials j
	http    *http.Client

	mu    sync.Mutex
	state []ProcState
	procs []*proc
	exits []Exit
}

// Start builds (once) and launches a cluster, waits until every member is
// ready, and registers teardown with t.Cleanup. t0 is the zero of the run's
// clock.
func Start(ctx context.Context, t testing.TB, cfg Config, t0 time.Time) (*Cluster, error) {
	if cfg.Nodes < 1 {
		return nil, errors.New("harness: Nodes must be positive")
	}
	bin, err := Build()
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if lv := os.Getenv("JEPSEN_LOG_LEVEL"); lv != "" {
		cfg.LogLevel = lv
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	c := &Cluster{
		t: t, cfg: cfg, bin: bin, t0: t0,
		http:  &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
		state: make([]ProcState, cfg.Nodes), procs: make([]*proc, cfg.Nodes),
	}
	hosts, err := pickHosts(cfg.Nodes)
	if err != nil {
		return nil, err
	}
	for i := 0; i < cfg.Nodes; i++ {
		id := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(cfg.Dir, id)
		c.members = append(c.members, Member{
			ID: id, Host: hosts[i],
			RaftAddr: net.JoinHostPort(hosts[i], fmt.Sprint(raftPort)),
			GRPCAddr: net.JoinHostPort(hosts[i], fmt.Sprint(grpcPort)),
			HTTPAddr: net.JoinHostPort(hosts[i], fmt.Sprint(httpPort)),
			DataDir:  dir, LogPath: filepath.Join(cfg.Dir, id+".log"),
		})
	}
	t.Cleanup(c.Close)
	c.links = make([][]*proxy.Proxy, cfg.Nodes)
	for i := range c.members {
		c.links[i] = make([]*proxy.Proxy, cfg.Nodes)
		for j := range c.members {
			if i == j {
				continue
			}
			name := c.members[i].ID + "->" + c.members[j].ID
			p, err := proxy.New(name, net.JoinHostPort(c.members[i].Host, "0"), c.members[j].RaftAddr, cfg.Seed+uint64(i*97+j))
			if err != nil {
				return nil, err
			}
			c.links[i][j] = p
		}
	}
	for i := range c.members {
		if err := c.Start(i); err != nil {
			return nil, err
		}
	}
	for i := range c.members {
		if err := c.WaitReady(ctx, i, 30*time.Second); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// pickHosts finds n loopback addresses 127.a.b.(1..n) whose ports are free.
// Binding 127.0.0.0/8 addresses other than 127.0.0.1 works on Linux without
// any setup.
func pickHosts(n int) ([]string, error) {
	for attempt := 0; attempt < 50; attempt++ {
		a, b := 1+rand.IntN(254), rand.IntN(256)
		var hosts []string
		ok := true
		for i := 0; i < n && ok; i++ {
			h := fmt.Sprintf("127.%d.%d.%d", a, b, i+1)
			for _, p := range []int{grpcPort, raftPort, httpPort} {
				l, err := net.Listen("tcp", net.JoinHostPort(h, fmt.Sprint(p)))
				if err != nil {
					ok = false
					break
				}
				l.Close()
			}
			hosts = append(hosts, h)
		}
		if ok {
			return hosts, nil
		}
	}
	return nil, errors.New("harness: no free block of loopback addresses")
}

// N is the number of members.
func (c *Cluster) N() int { return len(c.members) }

// ID is member i's ID.
func (c *Cluster) ID(i int) string { return c.members[i].ID }

// Member returns member i.
func (c *Cluster) Member(i int) Member { return c.members[i] }

// Members returns every member.
func (c *Cluster) Members() []Member { return append([]Member(nil), c.members...) }

// Spec is member i as the membership API wants it.
func (c *Cluster) Spec(i int) client.MemberSpec {
	m := c.members[i]
	return client.MemberSpec{ID: m.ID, RaftAddr: m.RaftAddr, GRPCAddr: m.GRPCAddr, HTTPAddr: m.HTTPAddr}
}

// Link is the proxy on the raft link member from dials member to.
func (c *Cluster) Link(from, to int) *proxy.Proxy { return c.links[from][to] }

// Links lists every link proxy.
func (c *Cluster) Links() []*proxy.Proxy {
	var out []*proxy.Proxy
	for i := range c.links {
		for j := range c.links[i] {
			if c.links[i][j] != nil {
				out = append(out, c.links[i][j])
			}
		}
	}
	return out
}

// Endpoints lists the members' gRPC addresses, starting at member first.
func (c *Cluster) Endpoints(first int) []string {
	var eps []string
	for k := 0; k < len(c.members); k++ {
		eps = append(eps, c.members[(first+k)%len(c.members)].GRPCAddr)
	}
	return eps
}

// Now is the time since t0 in nanoseconds.
func (c *Cluster) Now() int64 { return int64(time.Since(c.t0)) }

// Logf logs to the test log with the run's clock.
func (c *Cluster) Logf(format string, args ...any) {
	c.t.Helper()
	c.t.Logf("[%7.3fs] %s", time.Since(c.t0).Seconds(), fmt.Sprintf(format, args...))
}

// State is member i's process state.
func (c *Cluster) State(i int) ProcState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state[i]
}

func (c *Cluster) args(i int) []string {
	m := c.members[i]
	var peers, dial []string
	for j, o := range c.members {
		peers = append(peers, o.ID+"="+o.RaftAddr)
		if j != i {
			dial = append(dial, o.ID+"="+c.links[i][j].Addr())
		}
	}
	args := []string{"serve",
		"--id", m.ID, "--data-dir", m.DataDir,
		"--raft-addr", m.RaftAddr, "--grpc-addr", m.GRPCAddr, "--http-addr", m.HTTPAddr,
		"--peers", strings.Join(peers, ","), "--raft-dial", strings.Join(dial, ","),
		"--log-level", c.cfg.LogLevel,
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--heartbeat-timeout", c.cfg.HeartbeatTimeout}, {"--election-timeout", c.cfg.ElectionTimeout},
		{"--leader-lease-timeout", c.cfg.LeaderLeaseTimeout}} {
		if d.v > 0 {
			args = append(args, d.flag, d.v.String())
		}
	}
	return append(args, c.cfg.ExtraArgs...)
}

// Start starts member i (again, after Kill: same data dir, so it restarts
// from its raft state).
func (c *Cluster) Start(i int) error {
	m := c.members[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state[i] != Stopped {
		return fmt.Errorf("start %s: already %s", m.ID, c.state[i])
	}
	if err := os.MkdirAll(m.DataDir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== harness: starting %s at %.3fs\n", m.ID, time.Since(c.t0).Seconds())
	cmd := exec.Command(c.bin.Coordd, c.args(i)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group (terminal signals do not reach it); killed if the
	// test process dies without running its cleanups (e.g. go test's
	// timeout panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", m.ID, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logf}
	c.procs[i], c.state[i] = p, Running
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		expected := c.procs[i] != p // Kill and Close forget the proc first
		if !expected {
			c.procs[i], c.state[i] = nil, Stopped
			c.exits = append(c.exits, Exit{Member: m.ID, At: c.Now(), Err: fmt.Sprint(err)})
		}
		c.mu.Unlock()
		logf.Close()
		close(p.done)
		if !expected {
			c.t.Logf("UNEXPECTED EXIT of %s at %.3fs: %v (log %s)", m.ID, time.Since(c.t0).Seconds(), err, m.LogPath)
		}
	}()
	return nil
}

// take forgets member i's process (so its exit counts as deliberate).
func (c *Cluster) take(i int) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[i]
	c.procs[i], c.state[i] = nil, Stopped
	return p
}

// Kill SIGKILLs member i by PID and waits for it to die. Killing a stopped
// member is a no-op.
func (c *Cluster) Kill(i int) error {
	p := c.take(i)
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not die within 10s of SIGKILL", c.members[i].ID, p.cmd.Process.Pid)
	}
}

// Pause SIGSTOPs member i.
func (c *Cluster) Pause(i int) error { return c.signal(i, syscall.SIGSTOP, Running, Paused) }

// Resume SIGCONTs member i.
func (c *Cluster) Resume(i int) error { return c.signal(i, syscall.SIGCONT, Paused, Running) }

func (c *Cluster) signal(i int, sig syscall.Signal, from, to ProcState) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state[i] != from || c.procs[i] == nil {
		return fmt.Errorf("%v to %s: it is %s", sig, c.members[i].ID, c.state[i])
	}
	if err := c.procs[i].cmd.Process.Signal(sig); err != nil {
		return err
	}
	c.state[i] = to
	return nil
}

// PID is member i's process ID, or 0.
func (c *Cluster) PID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[i]; p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// Exits lists the process exits the harness did not cause.
func (c *Cluster) Exits() []Exit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Exit(nil), c.exits...)
}

// Close heals every link, kills every process by PID and closes the
// proxies. Safe to call twice.
func (c *Cluster) Close() {
	for i := range c.members {
		p := c.take(i)
		if p == nil {
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			c.t.Logf("harness: %s (pid %d) did not die", c.members[i].ID, p.cmd.Process.Pid)
		}
	}
	for _, p := range c.Links() {
		p.Close()
	}
}

// HealNetwork sets every link to pass.
func (c *Cluster) HealNetwork() {
	for _, p := range c.Links() {
		p.Pass()
	}
}

func (c *Cluster) get(ctx context.Context, i int, path string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.members[i].HTTPAddr+path, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// Ready reports whether member i's /readyz answers 200.
func (c *Cluster) Ready(ctx context.Context, i int) bool {
	_, code, err := c.get(ctx, i, "/readyz")
	return err == nil && code == http.StatusOK
}

// WaitReady polls member i's /readyz until it answers 200.
func (c *Cluster) WaitReady(ctx context.Context, i int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if c.Ready(ctx, i) {
			return nil
		}
		if c.State(i) == Stopped {
			return fmt.Errorf("%s is not running (log %s)", c.members[i].ID, c.members[i].LogPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v (log %s)", c.members[i].ID, timeout, c.members[i].LogPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Status is member i's own view of the cluster (GET /v1/cluster/status).
func (c *Cluster) Status(ctx context.Context, i int) (*coordpb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b, code, err := c.get(ctx, i, "/v1/cluster/status")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s status: HTTP %d: %s", c.members[i].ID, code, b)
	}
	var st coordpb.StatusResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s status: %w", c.members[i].ID, err)
	}
	return &st, nil
}

// Leader finds the member that reports itself leader in the highest term,
// polling until ctx ends.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	for {
		best, term := -1, uint64(0)
		for i := range c.members {
			if c.State(i) != Running {
				continue
			}
			st, err := c.Status(ctx, i)
			if err == nil && st.State == "Leader" && st.Term >= term {
				best, term = i, st.Term
			}
		}
		if best >= 0 {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no leader found: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Snapshot fetches member i's FSM snapshot (GET /v1/snapshot).
func (c *Cluster) Snapshot(ctx context.Context, i int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, code, err := c.get(ctx, i, "/v1/snapshot")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s snapshot: HTTP %d: %s", c.members[i].ID, code, b)
	}
	return b, nil
}

// CheckReplicas waits until every member reports the same applied index,
// fetches every member's FSM snapshot, and compares them byte for byte. It
// retries while the members are still catching up (background leader work
// such as TSO window extensions keeps committing entries), up to timeout.
// The client load must have stopped. The snapshots compared last are
// returned for the report.
func (c *Cluster) CheckReplicas(ctx context.Context, timeout time.Duration) (checker.Result, map[string][]byte) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last checker.Result
	var lastSnaps map[string][]byte
	attempts := 0
	for {
		attempts++
		idx, err := c.sameApplied(ctx)
		if err == nil {
			snaps := map[string][]byte{}
			for i := range c.members {
				b, err := c.Snapshot(ctx, i)
				if err != nil {
					last = checker.Result{Checker: "replicas-identical", Verdict: checker.Unknown, Summary: err.Error()}
					snaps = nil
					break
				}
				snaps[c.members[i].ID] = b
			}
			if snaps != nil {
				idx2, err := c.sameApplied(ctx)
				if err == nil && idx2 == idx {
					r, converged := checker.SnapshotsIdentical(snaps)
					last, lastSnaps = r, snaps
					if converged {
						r.Summary += fmt.Sprintf(", raft applied index %d, %d attempts", idx, attempts)
						return r, snaps
					}
				}
			}
		} else {
			last = checker.Result{Checker: "replicas-identical", Verdict: checker.Unknown, Summary: err.Error()}
		}
		select {
		case <-ctx.Done():
			// Never converging after the heal is a failure too (liveness).
			last.Checker = "replicas-identical"
			last.Verdict = checker.Invalid
			last.Details = append(last.Details, fmt.Sprintf("replicas did not converge within %v (%d attempts): %s", timeout, attempts, last.Summary))
			last.Violations++
			return last, lastSnaps
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sameApplied returns the applied index if every member reports the same
// one, with commit index equal to it and the same members.
func (c *Cluster) sameApplied(ctx context.Context) (uint64, error) {
	var idx []uint64
	var desc []string
	for i := range c.members {
		st, err := c.Status(ctx, i)
		if err != nil {
			return 0, err
		}
		idx = append(idx, st.AppliedIndex)
		desc = append(desc, fmt.Sprintf("%s applied %d commit %d", st.NodeId, st.AppliedIndex, st.CommitIndex))
		if st.CommitIndex != st.AppliedIndex {
			return 0, fmt.Errorf("not converged: %s", strings.Join(desc, ", "))
		}
	}
	sorted := append([]uint64(nil), idx...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
	if sorted[0] != sorted[len(sorted)-1] {
		return 0, fmt.Errorf("not converged: %s", strings.Join(desc, ", "))
	}
	return idx[0], nil
}

// CopyLogs copies every member's log into dir.
func (c *Cluster) CopyLogs(dir string) error {
	var errs []error
	for _, m := range c.members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(dir, m.ID+".log"), b, 0o644))
	}
	return errors.Join(errs...)
}

// LogProblems scans the member logs for panics, fatal errors and data
// races.
func (c *Cluster) LogProblems() []string {
	var out []string
	for _, m := range c.members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			continue
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, pat := range []string{"panic:", "fatal error:", "WARNING: DATA RACE"} {
				if strings.Contains(line, pat) {
					out = append(out, fmt.Sprintf("%s:%d: %s", m.ID, n+1, strings.TrimSpace(line)))
				}
			}
		}
	}
	return out
}

// logCounters are raft log lines counted as coverage: how often the run
// made raft elect, install snapshots, and so on.
var logCounters = []struct{ name, pattern string }{
	{"elections_won", "election won"},
	{"snapshot_installs", "Installed remote snapshot"},
	{"snapshots_taken", "snapshot complete up to"},
	{"prevote_failed", "pre-vote campaign failed"},
}

// LogCounts counts coverage events in the member logs.
func (c *Cluster) LogCounts() map[string]int {
	out := map[string]int{}
	for _, m := range c.members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			continue
		}
		s := string(b)
		for _, lc := range logCounters {
			out[lc.name] += strings.Count(s, lc.pattern)
		}
	}
	return out
}
