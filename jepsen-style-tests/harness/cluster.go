// Package harness runs a real coordd cluster for Jepsen-style tests: N
// coordd processes on loopback, each on its own 127.x.y.z address, with
// every directed raft link (i dials j) going through a fault proxy in the
// test process (coordd --raft-dial), one more fault proxy in front of each
// member's gRPC address for client traffic, fresh data dirs, and teardown of every
// process by PID when the test ends, whether it passed or not.
package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/proxy"
	supervise "github.com/coordd/coordd/proc"
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
	// Raft timing; zero means coordd's defaults (200ms/200ms/160ms).
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// ExtraArgs are appended to every member's command line (e.g.
	// --snapshot-threshold 64).
	ExtraArgs []string
	// LogLevel of the members; default "info" (JEPSEN_LOG_LEVEL overrides).
	LogLevel string
	// Dir holds the members' data dirs; default t.TempDir().
	Dir string
	// Insecure runs every member with --insecure (plaintext, no
	// authentication) instead of the default: TLS, mutual TLS on raft and
	// tokens, with a throwaway CA per run (security.go).
	Insecure bool
	// DiskPerMember, when positive, puts each member's data dir on a tmpfs
	// of that many bytes of its own (disk.go), for the disk-full nemesis.
	DiskPerMember int64
	// Restore, when set, is a backup file (docs/operations.md#backup-and-restore)
	// the cluster starts from instead of an empty state: restored into the
	// first member, which the others join one at a time (restore.go).
	// RestoreIDFloor is its `coordd restore --id-floor`.
	Restore        string
	RestoreIDFloor uint64
	// ReadyTimeout bounds the wait for each member to serve when the
	// cluster starts; default 30 s. A restored state's joins install it
	// by snapshot, which takes longer the larger it is.
	ReadyTimeout time.Duration
	// SnapshotTimeout, when positive, bounds one GET /v1/snapshot (replica
	// comparison) instead of the status client's 2 s: a large state takes
	// seconds to serialize and send.
	SnapshotTimeout time.Duration
}

// readyTimeout is Config.ReadyTimeout or its default.
func (cfg Config) readyTimeout() time.Duration {
	if cfg.ReadyTimeout > 0 {
		return cfg.ReadyTimeout
	}
	return 30 * time.Second
}

// Member is one coordd member's addresses and files.
type Member struct {
	ID, Host, RaftAddr, GRPCAddr, HTTPAddr, DataDir, LogPath string
}

// Cluster is a running coordd cluster.
type Cluster struct {
	procTable // one slot per member; its mu also guards join
	cfg       Config
	bin       Binaries
	members   []Member
	links     [][]*proxy.Proxy // links[i][j]: i dials j
	clients   []*proxy.Proxy   // clients[i]: workload clients -> member i's gRPC address
	http      *http.Client
	// bulk fetches snapshots when Config.SnapshotTimeout is set: no
	// client-wide timeout (http's 2 s would cut a large state's body);
	// each fetch is bounded by SnapshotTimeout.
	bulk   *http.Client
	sec    *Security // nil on an insecure run
	scheme string    // of the members' HTTP addresses: "https://" or "http://"

	join map[int]string // members replaced after a disk loss: --join through this gRPC address
	// disks are the members' own file systems (Config.DiskPerMember), one
	// mount point per member; nil when they share the ordinary disk.
	disks []string
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
		procTable: newProcTable(t, t0, cfg.Nodes), cfg: cfg, bin: bin,
		scheme: "http://",
	}
	hosts, err := pickHosts(cfg.Nodes)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{DisableKeepAlives: true}
	if !cfg.Insecure {
		if c.sec, err = newSecurity(filepath.Join(cfg.Dir, "pki"), hosts); err != nil {
			return nil, fmt.Errorf("harness: PKI: %w", err)
		}
		tr.TLSClientConfig, c.scheme = c.sec.ClientTLS.Clone(), "https://"
	}
	c.http = &http.Client{Timeout: 2 * time.Second, Transport: tr}
	c.bulk = &http.Client{Transport: tr}
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
		c.ids[i], c.logs[i] = id, c.members[i].LogPath
	}
	if cfg.DiskPerMember > 0 {
		if err := c.mountDisks(cfg.DiskPerMember); err != nil {
			t.Logf("harness: members share the ordinary disk, disk-full faults are skipped: %v", err)
		} else {
			// Registered first, so it runs after Close has stopped the members.
			t.Cleanup(func() {
				if err := unmountAll(c.disks); err != nil {
					t.Errorf("harness: %v", err)
				}
			})
		}
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
	for i, m := range c.members {
		p, err := proxy.New("clients->"+m.ID, net.JoinHostPort(m.Host, "0"), m.GRPCAddr, cfg.Seed+uint64(7919*(i+1)))
		if err != nil {
			return nil, err
		}
		c.clients = append(c.clients, p)
	}
	if cfg.Restore != "" {
		if err := c.startRestored(ctx); err != nil {
			return nil, err
		}
	} else {
		for i := range c.members {
			if err := c.Start(i); err != nil {
				return nil, err
			}
		}
		for i := range c.members {
			if err := c.WaitReady(ctx, i, cfg.readyTimeout()); err != nil {
				return nil, err
			}
		}
	}
	if c.sec != nil {
		if err := c.sec.createTokens(ctx, c); err != nil {
			return nil, fmt.Errorf("harness: tokens: %w", err)
		}
	}
	return c, nil
}

// Security is the run's PKI and tokens; nil on an insecure run (its
// methods then give plaintext settings).
func (c *Cluster) Security() *Security { return c.sec }

// Secure reports whether the run uses TLS and tokens.
func (c *Cluster) Secure() bool { return c.sec != nil }

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

// ClientLink is the proxy in front of member i's gRPC address that the
// workload clients dial (see ClientEndpoints).
func (c *Cluster) ClientLink(i int) *proxy.Proxy { return c.clients[i] }

// ClientLinks lists the client-link proxies, in member order.
func (c *Cluster) ClientLinks() []*proxy.Proxy { return append([]*proxy.Proxy(nil), c.clients...) }

// ClientEndpoints lists the addresses of the members' client-link proxies,
// starting at member first: what workload clients dial, so the nemesis can
// cut them (client-cut). Leader hints still name the direct gRPC
// addresses (coordd advertises its --grpc-addr), so a client that follows
// a hint talks to that member directly until the address fails.
func (c *Cluster) ClientEndpoints(first int) []string {
	var eps []string
	for k := 0; k < len(c.clients); k++ {
		eps = append(eps, c.clients[(first+k)%len(c.clients)].Addr())
	}
	return eps
}

// Endpoints lists the members' gRPC addresses, starting at member first:
// direct, bypassing the client-link proxies (the nemesis' admin client and
// the streaming nodes use these).
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
		"--raft-dial", strings.Join(dial, ","), "--log-level", c.cfg.LogLevel,
	}
	args = append(args, c.sec.memberArgs(i)...)
	if via, ok := c.join[i]; ok {
		args = append(args, "--join", via)
	} else {
		args = append(args, "--peers", strings.Join(peers, ","))
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.MkdirAll(c.members[i].DataDir, 0o755); err != nil {
		return err
	}
	_, err := c.startLocked(i, c.spec(i, "starting"), false, nil)
	return err
}

// spec is member i's command line with a log banner saying what the
// harness is doing; the caller holds c.mu (for join).
func (c *Cluster) spec(i int, doing string) supervise.Spec {
	return supervise.Spec{Path: c.bin.Coordd, Args: c.args(i), Banner: c.banner(i, doing)}
}

// Close heals every link, kills every process by PID and closes the
// proxies. Safe to call twice.
func (c *Cluster) Close() {
	for i := range c.members {
		p := c.take(i)
		if p == nil {
			continue
		}
		if err := p.child.Kill(10 * time.Second); err != nil {
			c.t.Logf("harness: %s: %v", c.members[i].ID, err)
		}
	}
	for _, p := range c.Links() {
		p.Close()
	}
	for _, p := range c.clients {
		p.Close()
	}
}

// HealNetwork sets every raft link and every client link to pass.
func (c *Cluster) HealNetwork() {
	for _, p := range c.Links() {
		p.Pass()
	}
	for _, p := range c.clients {
		p.Pass()
	}
}
