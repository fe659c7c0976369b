package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coordd/coordd/cluster"
)

// A comparison (-compare) runs each workload on coordd and on the peer
// (bench/etcdcoord over a 3-member etcd) in the same process, one cell
// after the other, through the same client code: the same gRPC calls, the
// same number of clients and shared connections. Both systems are up for
// the whole run; each JSON line is one (workload, variant, clients) cell
// with both sides and the ratio coordd_ops / peer_ops.

// row is one printed cell.
type row struct {
	Workload string `json:"workload"`
	Variant  string `json:"variant"`
	Clients  int    `json:"clients"`
	// ops/s; for count-100 allocations and batched checkpoints also
	// values/s
	CoorddOps    float64 `json:"coordd_ops"`
	CoorddP50ms  float64 `json:"coordd_p50_ms"`
	CoorddP99ms  float64 `json:"coordd_p99_ms"`
	CoorddMaxMs  float64 `json:"coordd_max_ms"`
	CoorddErrors int     `json:"coordd_errors"`
	PeerOps      float64 `json:"peer_ops"`
	PeerP50ms    float64 `json:"peer_p50_ms"`
	PeerP99ms    float64 `json:"peer_p99_ms"`
	PeerMaxMs    float64 `json:"peer_max_ms"`
	PeerErrors   int     `json:"peer_errors"`
	Ratio        float64 `json:"ratio"`
	// values/s for allocations of count > 1; checkpoints/s for w3's
	// checkpoint-batch-128
	CoorddValues float64            `json:"coordd_values_per_s,omitempty"`
	PeerValues   float64            `json:"peer_values_per_s,omitempty"`
	CoorddRSS    map[string]float64 `json:"coordd_rss_mib"`
	PeerRSS      map[string]float64 `json:"peer_rss_mib"`
	// the disk: what the data directory's disk does (probe before the
	// run), and the flushes it completed per second during each side's cell
	DiskFsyncsPerS        float64 `json:"disk_fsyncs_per_s"`
	CoorddDiskFlushesPerS float64 `json:"coordd_disk_flushes_per_s"`
	PeerDiskFlushesPerS   float64 `json:"peer_disk_flushes_per_s"`
	// coordd: raft log entries applied and the leader's log-store commits
	// (one bolt transaction = the leader's fsyncs) during the cell
	CoorddEntries       float64 `json:"coordd_log_entries,omitempty"`
	CoorddStoreCommits  float64 `json:"coordd_leader_store_commits,omitempty"`
	CoorddEntriesPerFsy float64 `json:"coordd_entries_per_store_commit,omitempty"`
	CoorddOpsPerFsync   float64 `json:"coordd_ops_per_store_commit,omitempty"`
	// commands proposed on the leader (coordd_propose_duration_seconds)
	// per leader log-store commit: the group-commit efficiency
	CoorddCommands         float64 `json:"coordd_commands,omitempty"`
	CoorddCommandsPerFsync float64 `json:"coordd_commands_per_store_commit,omitempty"`
	// coordd's raft term went up by this much during the cell (elections)
	CoorddTermChanges uint64 `json:"coordd_term_changes"`
	// peer: etcd transactions per second during the cell
	PeerTxnsPerS float64 `json:"peer_etcd_txns_per_s,omitempty"`
	// CPU seconds (user + system) of the coordinator's processes per 1,000
	// operations: coordd's three members; etcdcoord and its three etcd
	// members (streaming nodes and the load generator are left out)
	CoorddCPUPer1k float64 `json:"coordd_cpu_s_per_1k_ops,omitempty"`
	PeerCPUPer1k   float64 `json:"peer_cpu_s_per_1k_ops,omitempty"`
	// where coordd's commit round went (breakdown.go), milliseconds
	CoorddRound map[string]float64 `json:"coordd_round,omitempty"`
}

// variant is one measured operation of a workload.
type variant struct {
	name   string
	values int // values per call (allocations), 0 otherwise
	// counted: the op adds the values each successful call carried to
	// system.values (calls of varying size); the row's values/s is their
	// count over the measured pass
	counted bool
	// newOp builds client c's operation on a system.
	newOp func(s *system, c, clients int) clientOp
}

// workloadDef: setup runs once per system before the workload's cells.
type workloadDef struct {
	setup    func(s *system) error
	variants []variant
	maxOps   int
	// callTimeout: each call's deadline (default 10 s)
	callTimeout time.Duration
	// teardown, when set, runs once per system after the workload's cells.
	teardown func(s *system) error
}

func workloads() map[string]workloadDef {
	return map[string]workloadDef{"w1": w1(), "w2": w2(), "w3": w3(), "w4": w4(), "w5": w5(), "w6": w6()}
}

// coorddOnly are the workloads run on coordd alone (leader SIGKILL under
// w3 load; w3 with the cores saturated).
func coorddOnly(workload string) bool { return workload == "w3-failover" || workload == "w3-saturated" }

// parseClients reads "64" or "1,16,64".
func parseClients(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("-clients: %q is not a count in 1..1024", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func defaultEtcdBinary() string {
	if d := os.Getenv("COORDD_BENCH_CACHE"); d != "" {
		return filepath.Join(d, "bin", "etcd")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "coordd-bench", "bin", "etcd")
}

func runCompare(o options) error {
	clients, err := parseClients(o.clientsList)
	if err != nil {
		return err
	}
	defs := workloads()
	names := strings.Split(o.workload, ",")
	for _, n := range names {
		if _, ok := defs[n]; !ok && !coorddOnly(n) {
			return fmt.Errorf("-compare: unknown workload %q (w1..w6, w3-failover, w3-saturated)", n)
		}
	}
	// The peer is started only when a workload runs on it.
	withPeer := o.withPeer && slices.ContainsFunc(names, func(n string) bool { return !coorddOnly(n) })
	ports := launcherPorts(o.basePort, 3, 2)
	if withPeer {
		for i := range 3 {
			ports = append(ports, o.etcdPort+i, o.etcdPort+10+i)
		}
		ports = append(ports, o.peerPort)
		if o.profileDir != "" {
			ports = append(ports, o.peerPort+1) // the peer's pprof
		}
	}
	if err := portsFree(ports); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "coordbench-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fsyncs, err := fsyncRate(dir, 3000, 3*time.Second)
	if err != nil {
		return fmt.Errorf("fsync probe: %w", err)
	}
	fmt.Fprintf(os.Stderr, "coordbench: data dir %s: %.0f appending fdatasyncs/s\n", dir, fsyncs)

	bin, err := filepath.Abs(o.binary)
	if err != nil {
		return err
	}
	sn, err := filepath.Abs(o.snBinary)
	if err != nil {
		return err
	}
	// w6 lets a join even the counts at once on both systems: rebalancing
	// may move a channel however recently it was assigned (coordd's and the
	// peer's balance policy is the same vchannelFair). Other workloads keep
	// the default (5 minutes), so their owners do not move.
	var coorddW6, peerArgs []string
	if slices.Contains(names, "w6") {
		coorddW6, peerArgs = []string{"--min-rebalance-interval", "0s"}, []string{"-min-rebalance-interval", "0s"}
	}
	cdir := filepath.Join(dir, "coordd")
	cfg := cluster.LauncherConfig{Binary: bin, DataDir: cdir, Nodes: 3, BasePort: o.basePort, Host: "127.0.0.1",
		StreamingBinary: sn, StreamingNodes: 2,
		ExtraArgs: []string{"--log-level", "warn", "--pchannels", "16", "--object-store", filepath.Join(cdir, "objects"),
			// No seal policy fires during a run: every workload's segments
			// stay Growing on both systems (the peer never seals).
			"--segment-max-binlog-files", "1000000", "--segment-max-life", "24h", "--segment-max-idle", "24h",
			"--segment-channel-growing-mb", "1000000", "--segment-max-size-mb", "1000000"}}
	cfg.ExtraArgs = append(cfg.ExtraArgs, coorddW6...)
	cfg.ExtraArgs = append(cfg.ExtraArgs, strings.Fields(o.coorddFlags)...)
	peerArgs = append(peerArgs, strings.Fields(o.peerFlags)...)
	peerPprof := ""
	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
		peerPprof = fmt.Sprintf("127.0.0.1:%d", o.peerPort+1)
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--enable-pprof")
		peerArgs = append(peerArgs, "-pprof-addr", peerPprof)
	}
	l := cluster.NewLauncher(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := l.Start(ctx); err != nil {
		return fmt.Errorf("coordd cluster: %w", err)
	}
	defer l.Stop()
	select { // a member that could not start (e.g. a port taken meanwhile)
	case err := <-l.Exited():
		return fmt.Errorf("coordd cluster: %w", err)
	default:
	}
	cs, err := coorddSystem(l, o.conns)
	if err != nil {
		return err
	}
	defer cs.close()
	systems := []*system{cs}
	var ps *system
	if withPeer {
		pdir := filepath.Join(dir, "peer")
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return err
		}
		etcdBin := o.etcdBinary
		if etcdBin == "" {
			etcdBin = defaultEtcdBinary()
		}
		peerBin, err := filepath.Abs(o.peerBinary)
		if err != nil {
			return err
		}
		p, err := startPeer(etcdBin, peerBin, pdir, o.etcdPort, o.peerPort, peerArgs)
		if err != nil {
			return fmt.Errorf("peer: %w", err)
		}
		defer p.stop()
		if ps, err = p.system(o.conns, peerPprof); err != nil {
			return err
		}
		defer ps.close()
		systems = append(systems, ps)
	}

	enc := json.NewEncoder(os.Stdout)
	for _, n := range names {
		if n == "w3-failover" { // coordd only: leader SIGKILL under w3 load
			row, err := w3Failover(l, cs, clients[len(clients)-1], o.trials)
			if err != nil {
				return fmt.Errorf("w3-failover: %w", err)
			}
			if err := enc.Encode(row); err != nil {
				return err
			}
			continue
		}
		if n == "w3-saturated" { // coordd only: w3 with the cores saturated
			row, err := w3Saturated(l, cs, clients[len(clients)-1], o.duration, o.hogs, o.coorddFlags)
			if err != nil {
				return fmt.Errorf("w3-saturated: %w", err)
			}
			if err := enc.Encode(row); err != nil {
				return err
			}
			continue
		}
		def := defs[n]
		for _, s := range systems {
			if def.setup == nil {
				continue
			}
			if s.refresh != nil {
				if err := s.refresh(); err != nil {
					return err
				}
			}
			t0 := time.Now()
			if err := def.setup(s); err != nil {
				return fmt.Errorf("%s setup on %s: %w", n, s.name, err)
			}
			fmt.Fprintf(os.Stderr, "coordbench: %s setup on %s: %v\n", n, s.name, time.Since(t0).Round(time.Millisecond))
		}
		maxOps := o.maxOps
		if def.maxOps > 0 {
			maxOps = min(maxOps, def.maxOps)
		}
		for _, c := range clients {
			for _, v := range def.variants {
				r := row{Workload: n, Variant: v.name, Clients: c, DiskFsyncsPerS: round1(fsyncs)}
				if err := cs.refresh(); err != nil {
					return err
				}
				to := def.callTimeout
				if to == 0 {
					to = 10 * time.Second
				}
				prof := func(s *system) string {
					if o.profileDir == "" {
						return ""
					}
					return filepath.Join(o.profileDir, fmt.Sprintf("%s-%s-%s-%d.pprof", s.name, n, v.name, c))
				}
				cm := measure(cs, v, c, o.duration, to, maxOps, dir, prof(cs))
				var pm measured
				if ps != nil {
					pm = measure(ps, v, c, o.duration, to, maxOps, dir, prof(ps))
				}
				r.fill(cm, pm, v)
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
		}
		if def.teardown != nil {
			for _, s := range systems {
				if err := def.teardown(s); err != nil {
					return fmt.Errorf("%s teardown on %s: %w", n, s.name, err)
				}
			}
		}
	}
	return nil
}

// measured is one side of a cell.
type measured struct {
	st           cellStats
	rss          map[string]float64
	flushesPerS  float64
	entries, sc  float64
	commands     float64
	peerTxnsPerS float64
	termChanges  uint64
	cpuSeconds   float64
	round        map[string]float64
	values       int64 // system.values added during the measured pass
}

// measure runs one side of a cell; with a profile path, a CPU profile of
// the side's leader (coordd) or process (peer) is taken over the measured
// pass.
func measure(s *system, v variant, clients int, d, callTimeout time.Duration, maxOps int, dir, profile string) measured {
	var m measured
	sampler := sampleRSS(s.rss)
	var profDone chan struct{}
	defer func() {
		if profDone != nil {
			<-profDone
		}
	}()
	var f0 uint64
	var a0, c0, p0, t0 float64
	var start time.Time
	var term0 uint64
	var cpu0 float64
	var round0 roundSample
	var values0 int64
	m.st = runCell(clients, d, callTimeout, maxOps, func(c int) clientOp { return v.newOp(s, c, clients) }, func() {
		f0, _ = diskFlushes(dir)
		if s.raftCounters != nil {
			a0, c0, p0, _ = s.raftCounters()
		}
		if s.txns != nil {
			t0, _ = s.txns()
		}
		if s.term != nil {
			term0 = s.term()
		}
		if s.round != nil {
			round0 = s.round()
		}
		if s.pids != nil {
			cpu0 = cpuOf(s.pids())
		}
		if profile != "" && s.pprofAddr != "" {
			profDone = make(chan struct{})
			var wg sync.WaitGroup
			for i, addr := range append([]string{s.pprofAddr}, s.followerPprof...) {
				path := profile
				if i > 0 {
					path = strings.TrimSuffix(profile, ".pprof") + fmt.Sprintf("-follower%d.pprof", i)
				}
				wg.Add(1)
				go func() { defer wg.Done(); cpuProfile(addr, d, path) }()
			}
			go func() { wg.Wait(); close(profDone) }()
		}
		values0 = s.values.Load()
		start = time.Now()
	})
	m.values = s.values.Load() - values0
	el := time.Since(start).Seconds()
	if s.pids != nil {
		m.cpuSeconds = cpuOf(s.pids()) - cpu0
	}
	if s.round != nil {
		m.round = roundBreakdown(round0, s.round())
	}
	f1, _ := diskFlushes(dir)
	m.flushesPerS = float64(f1-f0) / el
	if s.raftCounters != nil {
		a1, c1, p1, _ := s.raftCounters()
		m.entries, m.sc, m.commands = a1-a0, c1-c0, p1-p0
	}
	if s.txns != nil {
		t1, _ := s.txns()
		m.peerTxnsPerS = (t1 - t0) / el
	}
	if s.term != nil {
		if t := s.term(); t > term0 && term0 > 0 {
			m.termChanges = t - term0
		}
	}
	m.rss = sampler.result()
	return m
}

func (r *row) fill(c, p measured, v variant) {
	r.CoorddOps, r.CoorddP50ms, r.CoorddP99ms, r.CoorddMaxMs, r.CoorddErrors = round1(c.st.OpsPerSec), c.st.P50ms, c.st.P99ms, c.st.MaxMs, c.st.Errors
	r.PeerOps, r.PeerP50ms, r.PeerP99ms, r.PeerMaxMs, r.PeerErrors = round1(p.st.OpsPerSec), p.st.P50ms, p.st.P99ms, p.st.MaxMs, p.st.Errors
	if p.st.OpsPerSec > 0 {
		r.Ratio = float64(int(c.st.OpsPerSec/p.st.OpsPerSec*100)) / 100
	}
	if v.counted {
		r.CoorddValues, r.PeerValues = perSecond(c.values, c.st.Elapsed), perSecond(p.values, p.st.Elapsed)
	} else if v.values > 1 {
		r.CoorddValues, r.PeerValues = round1(c.st.OpsPerSec*float64(v.values)), round1(p.st.OpsPerSec*float64(v.values))
	}
	r.CoorddRSS, r.PeerRSS = c.rss, p.rss
	r.CoorddDiskFlushesPerS, r.PeerDiskFlushesPerS = round1(c.flushesPerS), round1(p.flushesPerS)
	r.CoorddEntries, r.CoorddStoreCommits, r.CoorddCommands = c.entries, c.sc, c.commands
	if c.sc > 0 {
		r.CoorddEntriesPerFsy = round1(c.entries / c.sc)
		r.CoorddOpsPerFsync = round1(float64(c.st.Ops) / c.sc)
		r.CoorddCommandsPerFsync = round1(c.commands / c.sc)
	}
	r.PeerTxnsPerS = round1(p.peerTxnsPerS)
	r.CoorddTermChanges = c.termChanges
	if c.st.Ops > 0 {
		r.CoorddCPUPer1k = float64(int64(c.cpuSeconds/float64(c.st.Ops)*1e5)) / 100
	}
	if p.st.Ops > 0 {
		r.PeerCPUPer1k = float64(int64(p.cpuSeconds/float64(p.st.Ops)*1e5)) / 100
	}
	r.CoorddRound = c.round
}

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return round1(float64(n) / d.Seconds())
}

func round1(x float64) float64 { return float64(int64(x*10)) / 10 }
