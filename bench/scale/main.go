// Command scale is `make bench-scale`: one coordd cluster holding the
// largest documented Milvus (docs/scaling.md#milvus-max), on real
// processes over real TCP. It synthesizes the state as a backup file,
// restores it into the first member, lets two more join through raft
// (measured), drives Milvus's coordination rates at 1× and 5× with
// simulated streaming nodes, kills and replaces members at full state, runs
// a bulk CreateCollection/DropCollection, and ends with one table. The
// flags size everything, so the same program runs in seconds at a few
// thousand segments and for an hour at a million.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

type config struct {
	profile
	Nodes       int
	Watchers    int
	Binary      string
	Dir         string
	Keep        bool
	Row         time.Duration
	Factors     []float64
	Kills       int
	Replace     bool
	DDL         int
	DDLClients  int
	MemberFlags []string
	ReadyLimit  time.Duration
	ProfileDir  string // -profile: CPU and heap profiles of every member per load row
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.IntVar(&c.Segments, "segments", 1_000_000, "segments in the seeded state")
	fs.IntVar(&c.VChannels, "vchannels", 65536, "VChannels in the seeded state (collections of 4)")
	fs.IntVar(&c.PChannels, "pchannels", 256, "PChannels")
	fs.IntVar(&c.Tombstones, "tombstones", 8192, "finished broadcasts in the seeded state")
	fs.IntVar(&c.Nodes, "nodes", 32, "simulated streaming nodes")
	fs.IntVar(&c.Watchers, "watchers", 100, "assignment watchers open for the whole run (a load row at factor f opens up to 100×f)")
	fs.StringVar(&c.Binary, "coordd", "bin/coordd", "the coordd binary")
	fs.StringVar(&c.Dir, "dir", "", "work directory (default: a new temporary one, removed at the end unless -keep)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the work directory (data dirs, member logs)")
	fs.DurationVar(&c.Row, "row", 10*time.Minute, "length of each load row")
	factors := fs.String("factors", "1,5", "load rows, as multiples of Milvus-max's rates")
	fs.IntVar(&c.Kills, "kills", 10, "SIGKILLs of the leader (each restarted from its data dir)")
	fs.BoolVar(&c.Replace, "replace", true, "replace a follower with an empty data dir")
	fs.IntVar(&c.DDL, "ddl", 65536, "bulk CreateCollection then DropCollection broadcasts (0: skip)")
	fs.IntVar(&c.DDLClients, "ddl-clients", 64, "concurrent callers of the bulk DDL")
	memberFlags := fs.String("member-flags", "", "extra flags for every coordd serve, space separated")
	fs.DurationVar(&c.ReadyLimit, "ready-limit", 30*time.Minute, "longest wait for a member to become ready (join, restart)")
	fs.StringVar(&c.ProfileDir, "profile", "", "directory for a CPU profile (middle half of each load row) and a heap profile of every member; adds --enable-pprof to the members")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, f := range strings.Split(*factors, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			return c, fmt.Errorf("-factors: %q is not a positive number", f)
		}
		c.Factors = append(c.Factors, v)
	}
	if c.Segments < 0 || c.VChannels < 4 || c.PChannels < 1 || c.Nodes < 1 || c.Tombstones < 0 || c.DDL < 0 || c.DDLClients < 1 {
		return c, fmt.Errorf("sizes must be positive (vchannels at least 4)")
	}
	c.MemberFlags = strings.Fields(*memberFlags)
	if c.ProfileDir != "" {
		if err := os.MkdirAll(c.ProfileDir, 0o755); err != nil {
			return c, fmt.Errorf("-profile: %w", err)
		}
		c.MemberFlags = append(c.MemberFlags, "--enable-pprof")
	}
	return c, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := runScale(ctx, cfg)
	if rep != nil {
		rep.print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("%s  "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

// runScale is the whole run; the report holds whatever was measured
// before an error.
func runScale(ctx context.Context, cfg config) (*report, error) {
	rep := &report{cfg: cfg, start: time.Now(), loadStart: loadAvg()}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		rep.commit = strings.TrimSpace(string(out))
	}
	root := cfg.Dir
	if root == "" {
		d, err := os.MkdirTemp("", "coordd-scale-")
		if err != nil {
			return nil, err
		}
		root = d
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if !cfg.Keep && cfg.Dir == "" {
		defer os.RemoveAll(root)
	}
	bin, err := filepath.Abs(cfg.Binary)
	if err != nil {
		return nil, err
	}
	step("work dir %s; %d cores; load %s", root, runtime.NumCPU(), loadAvg())

	e, cleanup, err := seedCluster(ctx, cfg, root, bin, rep)
	defer cleanup()
	if err != nil {
		return rep, err
	}
	mo := rep.mon
	mo.setPhase("load setup")
	if _, _, err := e.leader(ctx, time.Minute); err != nil {
		return rep, err
	}
	e.logID.Store(1 << 40)
	setupSt := &opStats{}
	// One flush-path VChannel per SaveBinlogPaths call the fastest row may
	// have in flight: a slot takes one save at a time (a Milvus flusher
	// saves a segment's binlogs in order), so fewer slots than calls in
	// flight would measure the generator's queue, not coordd.
	fp := newFlushPath(e, flushSlots(cfg.Factors), 0)
	mf, err := e.setupManifests(ctx, 16, len(fp.slots), setupSt)
	if err != nil {
		return rep, err
	}
	var collBase atomic.Int64
	collBase.Store(800_000_000)
	step("load set up: %d flush-path VChannels, %d manifest segments", len(fp.slots), len(mf.segs))

	for i, f := range cfg.Factors {
		mo.setPhase(fmt.Sprintf("load %gx", f))
		var backupAt time.Duration
		if i == len(cfg.Factors)-1 {
			backupAt = cfg.Row / 2
		}
		step("load row %g× for %v (load %s)", f, cfg.Row, loadAvg())
		profiled := e.profileRow(ctx, cfg.ProfileDir, fmt.Sprintf("load-%gx", f), cfg.Row)
		r := e.loadRow(ctx, f, cfg.Row, fp, mf, &collBase, backupAt)
		profiled()
		rep.rows = append(rep.rows, r)
		printRow(r)
	}

	for k := range cfg.Kills {
		mo.setPhase(fmt.Sprintf("kill %d", k+1))
		r := e.killLeader(ctx, cfg.ReadyLimit)
		rep.kills = append(rep.kills, r)
		step("kill %d of the leader: first write %.0f ms, first push %.0f ms, restarted member serving after %.1f s, %d elections %s",
			k+1, ms(r.Write), ms(r.Push), r.Restart.Seconds(), r.Elections, r.Err)
		step("  the restarted member's way back (/readyz): %s", strings.Join(r.RestartPhases, "; "))
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	if cfg.Replace {
		mo.setPhase("replace")
		r := e.replaceFollower(ctx, "m4", cfg.ReadyLimit)
		rep.replace = &r
		step("replaced %s by %s (empty data dir): caught up in %.1f s, %d elections %s", r.Old, r.New, r.CatchUp.Seconds(), r.Elections, r.Err)
	}
	if cfg.DDL > 0 {
		mo.setPhase("bulk DDL")
		step("bulk DDL: %d CreateCollection then DropCollection from %d clients", cfg.DDL, cfg.DDLClients)
		r := e.bulkDDL(ctx, cfg.DDL, cfg.DDLClients, 700_000_000)
		rep.ddl = &r
	}
	mo.setPhase("end")
	rep.rssEnd = e.rssAll()
	rep.loadEnd = loadAvg()
	return rep, nil
}

// seedCluster builds the cluster holding the profile's state: the backup
// synthesized, restored into m1, the simulated nodes registered, and m2
// and m3 joined through raft (each join measured). cleanup stops
// everything it started, whatever the error.
func seedCluster(ctx context.Context, cfg config, root, bin string, rep *report) (*env, func(), error) {
	var stops []func()
	cleanup := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, cleanup, err
	}
	step("synthesizing %d segments, %d VChannels over %d PChannels, %d tombstones", cfg.Segments, cfg.VChannels, cfg.PChannels, cfg.Tombstones)
	seed, err := writeSeed(filepath.Join(root, "seed.backup"), cfg.profile)
	if err != nil {
		return nil, cleanup, err
	}
	runtime.GC()
	debug.FreeOSMemory()
	rep.seed = seed
	step("seed backup: %.1f MiB, index %d, built in %.1f s, written in %.1f s; segments %v",
		float64(seed.Bytes)/(1<<20), seed.Index, seed.Build.Seconds(), seed.Write.Seconds(), seed.SegStates)

	e := &env{seed: seed, objects: filepath.Join(root, "objects")}
	for i := 1; i <= 3; i++ {
		m, err := newMember(bin, root, fmt.Sprintf("m%d", i), cfg.MemberFlags)
		if err != nil {
			return nil, cleanup, err
		}
		e.members = append(e.members, m)
	}
	stops = append(stops, func() {
		for _, m := range e.running() {
			m.kill(true)
		}
	})
	m1 := e.members[0]
	t0 := time.Now()
	out, err := exec.CommandContext(ctx, bin, "restore", "--snapshot", seed.File, "--data-dir", m1.dir, "--id", m1.id,
		"--raft-addr", m1.raftAddr, "--id-floor", strconv.FormatUint(seed.NextID+1, 10)).CombinedOutput()
	if err != nil {
		return nil, cleanup, fmt.Errorf("coordd restore: %v: %s", err, out)
	}
	rep.restore = time.Since(t0)
	step("restored into %s in %.1f s", m1.dir, rep.restore.Seconds())

	mctx, mcancel := context.WithCancel(ctx)
	stops = append(stops, mcancel)
	mo := newMonitor()
	rep.mon = mo
	mo.setPhase("first member start")
	t0 = time.Now()
	if err := m1.start("", e.objects); err != nil {
		return nil, cleanup, err
	}
	if _, err := m1.waitReady(ctx, cfg.ReadyLimit); err != nil {
		return nil, cleanup, err
	}
	// The restored member's own first election (its term starts at the
	// backup's) is not counted: the monitor starts once it serves.
	go mo.run(mctx, e)
	rep.firstReady = time.Since(t0)
	step("m1 serving the restored state after %.1f s (RSS %.0f MiB)", rep.firstReady.Seconds(), rssMiB(m1.pid()))

	mo.setPhase("streaming nodes")
	sn, err := startSimNodes(cfg.Nodes)
	if err != nil {
		return nil, cleanup, err
	}
	stops = append(stops, sn.stop)
	e.sn = sn
	if _, _, err := e.leader(ctx, time.Minute); err != nil {
		return nil, cleanup, err
	}
	if err := sn.register(ctx, e.leaderConn()); err != nil {
		return nil, cleanup, err
	}
	e.startBackground(mctx, cfg.Watchers)
	if err := e.waitAssigned(ctx, cfg.PChannels, 5*time.Minute); err != nil {
		return nil, cleanup, err
	}
	step("%d simulated streaming nodes registered; all %d PChannels assigned; %d watchers open", cfg.Nodes, cfg.PChannels, cfg.Watchers)

	for _, m := range e.members[1:] {
		mo.setPhase("join " + m.id)
		term0 := e.maxTerm(ctx)
		t0 := time.Now()
		if err := m.start(m1.grpcAddr, e.objects); err != nil {
			return nil, cleanup, err
		}
		_, err := m.waitReady(ctx, cfg.ReadyLimit)
		j := joinResult{ID: m.id, Took: time.Since(t0), Elections: e.maxTerm(ctx) - term0, RSS: e.rssAll()}
		rep.joins = append(rep.joins, j)
		if err != nil {
			return nil, cleanup, err
		}
		step("%s joined and caught up in %.1f s, %d elections; RSS %v", m.id, j.Took.Seconds(), j.Elections, fmtRSS(j.RSS))
	}

	return e, cleanup, nil
}
