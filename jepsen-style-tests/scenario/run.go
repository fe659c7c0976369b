package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/harness"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
	"github.com/coordd/coordd/jepsen-style-tests/report"
	"github.com/coordd/coordd/jepsen-style-tests/workload"
	"github.com/coordd/coordd/testutil"
)

// run is one run of a scenario: what its phases share.
type run struct {
	t          *testing.T
	sc         Scenario
	seed       uint64
	start      time.Time // the run's start, also the history's time zero
	dir        string    // the report directory
	persistent bool      // dir outlives the test (JEPSEN_REPORT_DIR)
	sum        report.Summary
	failed     bool // the verdict failed the test (read by the cleanups)

	cl     *harness.Cluster
	sns    *harness.StreamingNodes // nil without streaming nodes
	walDir string
}

// load is the running client load: the workloads and the hostile clients.
type load struct {
	workloads   []workload.Workload
	wg          sync.WaitGroup
	hostileDone chan struct{}
	clients     int // client IDs the workloads use (the hostile ones follow)
	started     time.Time
}

// faults is what the nemesis phase leaves: the member nemesis, the heal's
// error and time, the streaming-node fault windows and, once the load has
// stopped, the timeline of every fault window.
type faults struct {
	nem              *nemesis.Nemesis
	healErr          error
	healedAt         int64
	streamingWindows []nemesis.Window
	timeline         []nemesis.Window // both, by start time (set by settle)
}

// Run runs sc with seed and fails t on any violation. It returns the
// summary (also written to the report directory). The phases: start the
// cluster and the streaming nodes, start the load, run the fault schedule
// and heal, let the load run on while the cluster recovers, check, report
// and judge.
func Run(t *testing.T, sc Scenario, seed uint64, full bool) report.Summary {
	sc.defaults()
	if _, err := harness.Build(); err != nil {
		t.Fatalf("build: %v", err)
	}
	r := newRun(t, sc, seed, full)
	defer func() {
		if r.failed || t.Failed() {
			t.Logf("FAILED: scenario %s seed %d; report in %s; repro: %s", sc.Name, seed, r.dir, r.sum.Repro)
		}
	}()

	// A member may take ReadyTimeout to serve: at the start each one in
	// turn (a preloaded cluster's joins).
	ctx, cancel := context.WithTimeout(context.Background(), sc.Duration+5*time.Minute+time.Duration(sc.Nodes)*sc.ReadyTimeout)
	defer cancel()
	r.startCluster(ctx)
	r.startStreamingNodes()
	admin, err := client.New(ctx, r.cl.Security().ClientConfig(harness.RoleAdmin, client.Config{Endpoints: r.cl.Endpoints(0), RequestTimeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	rec := history.NewRecorder(r.start)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	ld := r.startLoad(loadCtx, rec)
	f := r.runFaults(ctx, admin)
	ops := r.settle(ld, stopLoad, rec, &f)
	r.check(ctx, ops, ld.workloads, f)
	r.writeReport(ops, f)
	r.judge()
	return r.sum
}

// newRun names the report directory and starts the summary.
func newRun(t *testing.T, sc Scenario, seed uint64, full bool) *run {
	r := &run{t: t, sc: sc, seed: seed, start: time.Now()}
	r.dir, r.persistent = reportDir(t, sc.Name, seed, r.start)
	r.sum = report.Summary{
		Scenario: sc.Name, Seed: seed, Nodes: sc.Nodes, Started: r.start,
		Repro: Repro(sc.Name, seed, full), ExpectViolation: sc.ExpectViolation, KnownDefect: sc.KnownDefect,
	}
	for _, k := range sc.Faults {
		r.sum.Faults = append(r.sum.Faults, string(k))
	}
	t.Logf("scenario %s seed %d: %d nodes, faults %v, %v; report %s", sc.Name, seed, sc.Nodes, sc.Faults, sc.Duration, r.dir)
	t.Logf("repro: %s", r.sum.Repro)
	return r
}

// startCluster starts the members, secure unless the scenario or the
// environment says otherwise, and keeps their logs when the test fails.
func (r *run) startCluster(ctx context.Context) {
	t, sc := r.t, r.sc
	extra := sc.ExtraArgs
	if sc.ObjectStore {
		store := filepath.Join(t.TempDir(), "objects")
		if sc.ObjectStoreS3 {
			s3 := testutil.StartS3Server(t, "coordd")
			s3.UseTestCredentials(t) // the members inherit the environment
			store = s3.URL()
			t.Logf("object store: versitygw %s at %s", testutil.VersityGWVersion, s3.Endpoint())
		}
		extra = append(append([]string(nil), extra...), "--object-store", store)
	}
	insecure := sc.Insecure || harness.InsecureFromEnv()
	r.sum.Security = "tls+tokens"
	if insecure {
		r.sum.Security = "insecure"
	} else if sc.SecureBlocked != "" && os.Getenv("JEPSEN_FORCE_SECURE") != "1" {
		insecure, r.sum.Security = true, "insecure(secure-blocked)"
		t.Logf("scenario %s runs INSECURE, not secure: blocked by %s (JEPSEN_FORCE_SECURE=1 runs it secure)", sc.Name, sc.SecureBlocked)
	}
	var disk int64
	if slices.Contains(sc.Faults, nemesis.DiskFull) || slices.Contains(sc.FirstFaults, nemesis.DiskFull) {
		disk = memberDiskSize
	}
	cfg := harness.Config{Nodes: sc.Nodes, Seed: r.seed, ExtraArgs: extra, Dir: filepath.Join(t.TempDir(), "data"),
		Insecure: insecure, DiskPerMember: disk, ReadyTimeout: sc.ReadyTimeout, SnapshotTimeout: sc.SnapshotTimeout}
	if sc.Preload != nil {
		r.preload(&cfg)
	}
	cl, err := harness.Start(ctx, t, cfg, r.start)
	if err != nil {
		t.Fatalf("start cluster (seed %d, %s): %v", r.seed, r.sum.Security, err)
	}
	r.cl = cl
	t.Cleanup(r.keepLogs)
	cl.Logf("cluster of %d ready (%s)", sc.Nodes, r.sum.Security)
}

// preload writes the scenario's synthetic state as a backup file for the
// cluster to start from, and notes its size in the summary.
func (r *run) preload(cfg *harness.Config) {
	pf, err := writePreload(r.t.TempDir(), *r.sc.Preload)
	if err != nil {
		r.t.Fatalf("preload (seed %d): %v", r.seed, err)
	}
	cfg.Restore, cfg.RestoreIDFloor = pf.Path, pf.IDFloor
	if r.sum.Extra == nil {
		r.sum.Extra = map[string]string{}
	}
	r.sum.Extra["preload_segments"] = fmt.Sprint(pf.Segments)
	r.sum.Extra["preload_backup_mib"] = fmt.Sprintf("%.1f", float64(pf.Bytes)/(1<<20))
	r.sum.Extra["preload_index"] = fmt.Sprint(pf.Index)
	r.t.Logf("preloaded state: %d segments, backup %.1f MiB at index %d, built in %.1f s", pf.Segments,
		float64(pf.Bytes)/(1<<20), pf.Index, pf.Build.Seconds())
}

// keepLogs copies the member logs into the report (on failure, or always
// with JEPSEN_KEEP_LOGS=1), prints their tails on failure, and keeps a
// failed run's temporary report.
func (r *run) keepLogs() {
	t, dir := r.t, r.dir
	if t.Failed() || os.Getenv("JEPSEN_KEEP_LOGS") == "1" {
		_ = r.cl.CopyLogs(dir)
	}
	if t.Failed() {
		for _, m := range r.cl.Members() {
			if b, err := os.ReadFile(m.LogPath); err == nil {
				t.Logf("--- tail of %s ---\n%s", m.ID, tail(string(b), 25))
			}
		}
	}
	if !r.persistent && (t.Failed() || r.failed) {
		keep := filepath.Join(os.TempDir(), "coordd-jepsen-reports", filepath.Base(dir))
		if err := os.MkdirAll(filepath.Dir(keep), 0o755); err == nil {
			if err := os.CopyFS(keep, os.DirFS(dir)); err == nil {
				t.Logf("report kept in %s", keep)
			}
		}
	}
}

// startStreamingNodes starts the scenario's streaming nodes, if any.
func (r *run) startStreamingNodes() {
	t, sc := r.t, r.sc
	if sc.StreamingNodes <= 0 {
		return
	}
	sns, err := harness.StartStreamingNodes(t, r.cl, sc.StreamingNodes, filepath.Join(t.TempDir(), "sn"), sc.StreamingArgs...)
	if err != nil {
		t.Fatalf("start streaming nodes (seed %d): %v", r.seed, err)
	}
	r.sns, r.walDir = sns, sns.WALDir
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("JEPSEN_KEEP_LOGS") == "1" {
			sns.CopyLogs(r.dir)
		}
	})
	r.cl.Logf("%d streaming nodes started (WAL %s)", sc.StreamingNodes, r.walDir)
}

// startLoad starts every workload, and the hostile clients if the
// scenario has them, until loadCtx ends.
func (r *run) startLoad(loadCtx context.Context, rec *history.Recorder) *load {
	t, sc := r.t, r.sc
	ld := &load{workloads: sc.Workloads(sc.Nodes), hostileDone: make(chan struct{})}
	if sc.KnownDefect != "" {
		t.Logf("scenario %s runs with a KNOWN DEFECT, expected to make %s fail: %s", sc.Name, sc.ExpectChecker, sc.KnownDefect)
	}
	for k, w := range ld.workloads {
		r.sum.Workloads = append(r.sum.Workloads, w.Name())
		// Workload clients dial the client-link proxies (client-cut);
		// the admin client and the HTTP checks go direct.
		env := workload.Env{Endpoints: r.cl.ClientEndpoints, Members: sc.Nodes, Recorder: rec, Seed: r.seed + uint64(k)*1000003, ClientBase: ld.clients,
			WALDir: r.walDir, Creds: credentials(r.cl)}
		ld.clients += w.Clients()
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			if err := w.Run(loadCtx, env); err != nil {
				t.Errorf("workload %s: %v", w.Name(), err)
			}
		}()
	}
	ld.started = time.Now()
	if !sc.Hostile {
		close(ld.hostileDone)
		return ld
	}
	go func() {
		defer close(ld.hostileDone)
		hc := hostileConfig(r.cl, r.sns, rec, r.seed, sc.Duration, ld.clients)
		hc.Kinds, hc.Claims = sc.HostileKinds, sc.HostileClaims
		nemesis.RunHostile(loadCtx, hc)
	}()
	return ld
}

// runFaults runs the member nemesis and, alongside, the streaming-node
// one, then heals everything.
func (r *run) runFaults(ctx context.Context, admin *client.Client) faults {
	sc := r.sc
	nem := nemesis.New(r.cl, nemesis.Config{
		Seed: r.seed, Kinds: sc.Faults, First: sc.FirstFaults, Duration: sc.Duration, MaxFaults: sc.MaxFaults,
		QuietMin: sc.QuietMin, QuietMax: sc.QuietMax, HoldMin: sc.HoldMin, HoldMax: sc.HoldMax,
		ElectionTimeout: 250 * time.Millisecond, ReadyTimeout: sc.ReadyTimeout,
	}, admin)
	snDone := make(chan []nemesis.Window, 1)
	if r.sns != nil && sc.StreamingFaults {
		go func() { snDone <- streamingNemesis(ctx, r.cl, r.sns, r.seed, sc.Duration, sc.StreamingPauseOnly) }()
	} else {
		snDone <- nil
	}
	f := faults{nem: nem, healErr: nem.Run(ctx)}
	snWindows := <-snDone
	if r.sns != nil {
		if err := r.sns.Heal(); err != nil {
			f.healErr = errors.Join(f.healErr, err)
		}
	}
	f.healedAt = r.cl.Now()
	f.streamingWindows = snWindows
	return f
}

// settle keeps the load on for the recovery time, stops it, and returns
// the history; f gets the fault timeline.
func (r *run) settle(ld *load, stopLoad context.CancelFunc, rec *history.Recorder, f *faults) []history.Op {
	r.cl.Logf("nemesis done: %d faults; healed (err=%v); recovery load for %v", f.nem.Injected(), f.healErr, r.sc.Recovery)
	time.Sleep(r.sc.Recovery)
	stopLoad()
	ld.wg.Wait()
	<-ld.hostileDone
	r.sum.LoadTime = time.Since(ld.started)
	ops := rec.Close()
	r.sum.Ops = history.Count(ops)
	f.timeline = append(f.nem.Timeline(), f.streamingWindows...)
	sort.Slice(f.timeline, func(i, j int) bool { return f.timeline[i].Start < f.timeline[j].Start })
	r.sum.Injected = len(f.timeline)
	r.sum.ByKind, r.sum.FaultErrors = report.FaultCounts(f.timeline)
	return ops
}

// check runs every checker on the history, the replicas and the processes.
func (r *run) check(ctx context.Context, ops []history.Op, wls []workload.Workload, f faults) {
	sc, sum := r.sc, &r.sum
	var notes []checker.Annotation
	for _, w := range f.timeline {
		notes = append(notes, checker.Annotation{Start: w.Start, End: w.End, Tag: "nemesis",
			Text: fmt.Sprintf("#%d %s %s", w.Seq, w.Kind, w.Targets)})
	}
	for _, w := range wls {
		sum.Results = append(sum.Results, w.Check(ops, r.dir, notes)...)
	}
	if sc.Hostile {
		sum.Results = append(sum.Results, checker.HostileRefused(ops, nemesis.HostilePrefix, nemesis.ClaimHarmlessKinds...),
			checker.PChannelsOwned(ops, nemesis.FOwners, OwnerBound(sc.ExtraArgs)))
	}
	sum.Results = append(sum.Results, recovered(ops, f.healedAt, f.healErr))
	rr, snaps := r.cl.CheckReplicas(ctx, 60*time.Second)
	if rr.Verdict == checker.Invalid && snaps != nil {
		for id, b := range snaps {
			_ = os.WriteFile(filepath.Join(r.dir, "snapshot-"+id+".bin"), b, 0o644)
		}
	}
	sum.Results = append(sum.Results, rr, r.crashes(), storageRefused(f.nem.Violations()))
	sum.Verdict = checker.Overall(sum.Results)
	sum.Coverage = r.cl.LogCounts()
	sum.Wall = time.Since(r.start)
}

// crashes is the no-crashes check: no member or streaming node exited
// unexpectedly or logged a panic or a data race.
func (r *run) crashes() checker.Result {
	crash := checker.Result{Checker: "no-crashes", Verdict: checker.Valid}
	add := func(exits []harness.Exit, problems []string) {
		for _, e := range exits {
			crash.Verdict = checker.Invalid
			crash.Violations++
			msg := fmt.Sprintf("%s exited unexpectedly at %.3fs: %s", e.Member, float64(e.At)/1e9, e.Err)
			crash.Details = append(crash.Details, msg)
			r.sum.Crashes = append(r.sum.Crashes, msg)
		}
		for _, p := range problems {
			crash.Verdict = checker.Invalid
			crash.Violations++
			if len(crash.Details) < 20 {
				crash.Details = append(crash.Details, p)
			}
			r.sum.Crashes = append(r.sum.Crashes, p)
		}
	}
	add(r.cl.Exits(), r.cl.LogProblems())
	if r.sns != nil {
		add(r.sns.Exits(), r.sns.LogProblems())
	}
	crash.Summary = fmt.Sprintf("%d unexpected exits or panics", crash.Violations)
	return crash
}

// writeReport writes the report directory and logs every failed check.
func (r *run) writeReport(ops []history.Op, f faults) {
	t := r.t
	if err := report.Write(r.dir, r.sum, ops, report.Timeline{Plan: f.nem.Plan(), Windows: f.timeline}); err != nil {
		t.Errorf("write report: %v", err)
	}
	for _, res := range r.sum.Results {
		if res.Verdict != checker.Valid {
			t.Logf("%v", res)
		}
	}
	t.Log(report.VerdictLine(r.sum, r.dir))
}

// judge fails the test unless the verdict is what the scenario expects: no
// violation, or the injected bug or known defect caught by its checker.
func (r *run) judge() {
	t, sc, sum := r.t, r.sc, r.sum
	caught := sum.Verdict == checker.Invalid
	if sc.ExpectChecker != "" {
		caught = false
		for _, res := range sum.Results {
			if res.Checker == sc.ExpectChecker && res.Verdict == checker.Invalid {
				caught = true
			}
		}
	}
	switch {
	case sc.KnownDefect != "" && caught:
		t.Logf("scenario %s: the known defect still reproduces (%s invalid): %s", sc.Name, sc.ExpectChecker, sc.KnownDefect)
	case sc.KnownDefect != "":
		r.failed = true
		t.Errorf("scenario %s seed %d: the known defect no longer reproduces (%s is %s): drop KnownDefect (and ExpectViolation) from the scenario: %s",
			sc.Name, r.seed, sc.ExpectChecker, sum.Verdict, sc.KnownDefect)
	case sc.ExpectViolation && caught:
		t.Logf("scenario %s: the injected bug was caught, as it must be", sc.Name)
	case sc.ExpectViolation:
		r.failed = true
		t.Errorf("scenario %s seed %d: the injected bug was NOT caught (verdict %s, expected checker %q)", sc.Name, r.seed, sum.Verdict, sc.ExpectChecker)
	case sum.Verdict == checker.Invalid:
		r.failed = true
		t.Errorf("scenario %s seed %d: violations found (see above; report %s)", sc.Name, r.seed, r.dir)
	}
}

// memberDiskSize is the file system each member gets in a scenario with the
// disk-full fault: far more than a run's data dir needs (tiny snapshots,
// small raft-wal segments), so only the fault fills it.
const memberDiskSize = 512 << 20
