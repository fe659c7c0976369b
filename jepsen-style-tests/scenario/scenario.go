// Package scenario runs one Jepsen-style scenario end to end: start a
// cluster with a proxy on every raft link, run the workloads while the
// nemesis follows its seeded schedule, heal, keep the load on for a while
// to see the cluster recover, stop the load, check the history and the
// replicas, and write the report.
package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/harness"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
	"github.com/coordd/coordd/jepsen-style-tests/workload"
)

// Scenario is one cell of the test matrix.
type Scenario struct {
	Name  string
	Nodes int
	// Faults the nemesis draws from.
	Faults []nemesis.Kind
	// FirstFaults are scheduled before those drawn from Faults (so a short
	// run is sure to include them).
	FirstFaults []nemesis.Kind
	// Duration of the fault phase (the load runs through it).
	Duration time.Duration
	// Recovery is how long the load keeps running after the heal.
	Recovery time.Duration
	// Fault pacing; zero means defaults (quiet 0.5-1.5 s, hold 1-3 s).
	QuietMin, QuietMax, HoldMin, HoldMax time.Duration
	MaxFaults                            int
	// ExtraArgs for every coordd (e.g. tiny snapshot thresholds).
	ExtraArgs []string
	// Workloads builds the workloads (fresh per run).
	Workloads func(nodes int) []workload.Workload
	// ExpectViolation marks a test of the tests: the run injects a bug and
	// passes only if the checkers find a violation.
	ExpectViolation bool
	// ExpectChecker, with ExpectViolation, names the checker that must
	// report the violation (others may too).
	ExpectChecker string
	// KnownDefect, with ExpectViolation and ExpectChecker, marks a
	// scenario that cannot pass yet: it names the open defect that makes
	// ExpectChecker fail. The run passes while the defect reproduces and
	// fails, asking for this field to go, once it no longer does.
	KnownDefect string
	// StreamingNodes starts this many streaming nodes (shared WAL dir)
	// once the cluster is ready; StreamingFaults adds their nemesis
	// (SIGKILL + restart, SIGSTOP past the node TTL + SIGCONT).
	StreamingNodes  int
	StreamingFaults bool
	// StreamingPauseOnly limits the streaming nemesis to pauses, so the
	// node that takes a paused node's channels stays alive (and keeps its
	// registration) when they move back.
	StreamingPauseOnly bool
	// StreamingArgs are extra arguments for every streaming node (e.g. a
	// test-only flag that breaks it).
	StreamingArgs []string
	// ObjectStore gives every coordd member --object-store on one shared
	// directory (manifest revisions).
	ObjectStore bool
	// ObjectStoreS3, with ObjectStore, puts that store in a bucket of a
	// real S3 server (versitygw on loopback, testutil.StartS3Server) the
	// run starts, instead of a directory: exclusive creates are
	// conditional PUTs there. The members sign with test credentials from
	// their environment.
	ObjectStoreS3 bool
	// Insecure runs this scenario with --insecure (plaintext, no tokens):
	// the explicit insecure variant. Every other scenario runs secure (TLS,
	// mutual TLS on raft, a token per client role, certificates for the
	// streaming nodes) unless JEPSEN_INSECURE=1.
	Insecure bool
	// SecureBlocked names an open defect that keeps this scenario from
	// working secure. Until it is fixed the scenario runs insecure, and its
	// log and verdict line say so and why (JEPSEN_FORCE_SECURE=1 runs it
	// secure anyway, to see whether the fix landed).
	SecureBlocked string
	// Hostile adds the hostile-client nemesis (nemesis/hostile.go): forged
	// data-path calls with the wrong credentials, each recorded and
	// checked to be refused. HostileKinds limits its forged calls to
	// these kinds (nemesis.Forge*; default all).
	Hostile      bool
	HostileKinds []string
	// HostileClaims adds the claim writer to the hostile nemesis
	// (nemesis/claim.go): the proxy credential claims upcoming broadcast
	// IDs on the streaming nodes.
	HostileClaims bool
	// Preload, when set, starts the cluster from this synthetic state
	// instead of an empty one (preload.go): written as a backup file,
	// restored into the first member, installed into the others by
	// snapshot as they join.
	Preload *fsm.SyntheticShape
	// ReadyTimeout bounds every wait for a member to serve: the cluster's
	// start (with Preload, each join's snapshot install) and the
	// nemesis' restarts, re-adds, replacements and heal; zero keeps the
	// defaults (30 s to start or restart, 60 s to replace or heal). A
	// large state takes seconds to load and to install.
	ReadyTimeout time.Duration
	// SnapshotTimeout bounds one FSM snapshot fetch of the replica
	// comparison; zero keeps the 2 s of every HTTP check.
	SnapshotTimeout time.Duration
}

// ChannelArgs make channel management fast enough for a short run: node
// TTL 2 s, balance rounds every second, no minimum rebalance interval.
var ChannelArgs = []string{"--pchannels", "4", "--node-ttl", "2s", "--balance-interval", "1s", "--min-rebalance-interval", "0s"}

// ChannelWorkloads is the channel workload, the broadcast workload and
// the allocators.
func ChannelWorkloads(nodes int) []workload.Workload {
	return []workload.Workload{&workload.Channels{NClients: 4, PChannels: 3, Zombies: true}, &workload.Broadcast{NClients: 3, PChannels: 3},
		&workload.Alloc{NClients: nodes}}
}

// BroadcastOpsWorkloads is the broadcast workload with operators racing
// replication updates and abandoning pending broadcasts.
func BroadcastOpsWorkloads(int) []workload.Workload {
	return []workload.Workload{&workload.Broadcast{NClients: 3, PChannels: 3}, &workload.Operator{}}
}

// FlushArgs are ChannelArgs plus quick seal/flush rounds and short
// segment allocations.
var FlushArgs = append(append([]string(nil), ChannelArgs...), "--segment-check-interval", "200ms", "--segment-assignment-expiration", "1s")

// FlushStreamingArgs make the flushers save growing segments every 300 ms,
// so flushes, kills and recoveries under faults meet partial saves (and a
// partial save whose answer is lost).
var FlushStreamingArgs = []string{"--flusher-save-interval", "300ms"}

// FlushWorkloads is the write-path workload.
func FlushWorkloads(int) []workload.Workload {
	return []workload.Workload{&workload.Flush{}}
}

// ManifestArgs run the orphan collector often, with a grace period that
// outlasts any commit's write-to-apply window in a short run.
var ManifestArgs = []string{"--manifest-gc-interval", "1s", "--manifest-gc-grace", "3s"}

// ManifestWorkloads is the manifest-commit workload.
func ManifestWorkloads(int) []workload.Workload {
	return []workload.Workload{&workload.Manifest{}}
}

// Allocators is the allocator workload, two clients per member.
func Allocators(nodes int) []workload.Workload {
	return []workload.Workload{&workload.Alloc{NClients: 2 * nodes}}
}

// tinySnapshotThresholds make raft snapshot all the time. The allocators
// write only a few entries a second (window extensions and ID range
// reservations), so the thresholds are tiny.
var tinySnapshotThresholds = []string{"--snapshot-threshold", "4", "--trailing-logs", "4", "--snapshot-interval", "50ms"}

// TinySnapshots runs the members on the bolt log store with tiny snapshot
// thresholds: bolt truncates its log to --trailing-logs at every snapshot,
// so restarted and lagging members catch up by snapshot install, and the
// storage faults damage a raft.db that holds the log. (raft-wal, the
// default, drops only whole 64 MiB segments and so rarely sends one.)
var TinySnapshots = append(append([]string(nil), tinySnapshotThresholds...), "--raft-log-store", "bolt")

// WALTinySnapshots runs the members on the raft-wal log store with the
// same thresholds and 4 KiB segments (raft-wal compacts a whole segment at
// a time): a replacement and members that fall behind the compacted log
// catch up by snapshot, onto a log raft-wal must clear first.
var WALTinySnapshots = append(append([]string(nil), tinySnapshotThresholds...), "--raft-log-store", "wal", "--raft-wal-segment-size", "4096")

func (s *Scenario) defaults() {
	if s.Nodes == 0 {
		s.Nodes = 3
	}
	if s.Recovery == 0 {
		s.Recovery = 3 * time.Second
	}
	if s.QuietMin == 0 {
		s.QuietMin, s.QuietMax = 500*time.Millisecond, 1500*time.Millisecond
	}
	if s.HoldMin == 0 {
		s.HoldMin, s.HoldMax = time.Second, 3*time.Second
	}
	if s.MaxFaults == 0 {
		s.MaxFaults = 1000
	}
	if s.Workloads == nil {
		s.Workloads = Allocators
	}
}

// Repro is the command that replays a run.
func Repro(name string, seed uint64, full bool) string {
	env := ""
	if full {
		env = "JEPSEN_FULL=1 "
	}
	return fmt.Sprintf("%sJEPSEN_SCENARIO=%s JEPSEN_SEED=%d go test -tags hashicorpmetrics -count=1 -timeout 60m -run 'TestJepsen' -v ./jepsen-style-tests/", env, name, seed)
}

// storageRefused reports what the storage faults saw: a member must refuse
// a data dir that lost its raft state, a wiped data dir restarted with
// --peers beside its running peers, and damaged storage (with one clear
// line, never a crash).
func storageRefused(violations []string) checker.Result {
	r := checker.Result{Checker: "storage-refused", Verdict: checker.Valid, Summary: "every lost or damaged data dir was refused or harmless"}
	if len(violations) > 0 {
		r.Verdict, r.Violations, r.Details = checker.Invalid, len(violations), violations
		r.Summary = fmt.Sprintf("%d members came back on storage they should have refused", len(violations))
	}
	return r
}

// recovered checks liveness after the heal: the cluster must serve every
// operation kind of the history again once every fault is gone.
func recovered(ops []history.Op, healedAt int64, healErr error) checker.Result {
	r := checker.Result{Checker: "recovers-after-heal", Verdict: checker.Valid}
	if healErr != nil {
		r.Verdict, r.Violations = checker.Invalid, 1
		r.Details = append(r.Details, "heal failed: "+healErr.Error())
	}
	kinds := map[string]int{}
	for _, o := range ops {
		if strings.HasPrefix(o.F, nemesis.HostilePrefix) {
			continue // forged calls must never succeed
		}
		if _, ok := kinds[o.F]; !ok {
			kinds[o.F] = 0
		}
		if o.Type == history.Ok && o.Invoke >= healedAt {
			kinds[o.F]++
		}
	}
	var parts []string
	for f, n := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d ok", f, n))
		if n == 0 {
			r.Verdict = checker.Invalid
			r.Violations++
			r.Details = append(r.Details, fmt.Sprintf("no %s succeeded after the heal at %.3fs", f, float64(healedAt)/1e9))
		}
	}
	r.Summary = "after heal: " + strings.Join(parts, ", ")
	return r
}

// reportDir is JEPSEN_REPORT_DIR/<scenario>-seed<seed>-<time> if the
// variable is set (persistent), else a test temp dir.
func reportDir(t *testing.T, name string, seed uint64, start time.Time) (string, bool) {
	base := os.Getenv("JEPSEN_REPORT_DIR")
	leaf := fmt.Sprintf("%s-seed%d-%s", name, seed, start.Format("20060102-150405"))
	if base == "" {
		dir := filepath.Join(t.TempDir(), leaf)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir, false
	}
	dir := filepath.Join(base, leaf)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, true
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// streamingNemesis SIGKILLs (and restarts) or SIGSTOPs (past the 2 s node
// TTL, then SIGCONTs; only this with pauseOnly) a random streaming node, one
// fault at a time, for d. Decisions come from seed; the windows join the
// timeline.
func streamingNemesis(ctx context.Context, cl *harness.Cluster, sns *harness.StreamingNodes, seed uint64, d time.Duration,
	pauseOnly bool) []nemesis.Window {
	rng := rand.New(rand.NewPCG(seed, 0x736e))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	deadline := time.Now().Add(d)
	var out []nemesis.Window
	for seq := 1000; ; seq++ {
		quiet := between(time.Second, 2500*time.Millisecond)
		kill := rng.IntN(2) == 0 && !pauseOnly
		i := rng.IntN(sns.N())
		hold := between(500*time.Millisecond, 2*time.Second)
		if !kill {
			hold = between(3*time.Second, 4*time.Second) // past the 2 s TTL
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(quiet):
		}
		if time.Now().After(deadline) {
			return out
		}
		w := nemesis.Window{Seq: seq, Targets: sns.ID(i), Start: cl.Now()}
		var err error
		if kill {
			w.Kind, w.Detail = "sn-kill", fmt.Sprintf("SIGKILL, restart after %v", hold.Round(time.Millisecond))
			err = sns.Kill(i)
			time.Sleep(hold)
			err = errors.Join(err, sns.Start(i))
		} else {
			w.Kind, w.Detail = "sn-pause", fmt.Sprintf("SIGSTOP for %v (node TTL 2s)", hold.Round(time.Millisecond))
			err = sns.Pause(i)
			time.Sleep(hold)
			err = errors.Join(err, sns.Resume(i))
		}
		w.End = cl.Now()
		if err != nil {
			w.Error = err.Error()
		}
		cl.Logf("streaming nemesis: %s %s (%s) err=%v", w.Kind, w.Targets, w.Detail, err)
		out = append(out, w)
	}
}

// credentials are the workload clients' credentials on a secure run (nil
// on an insecure one): the run's CA, and a token per role; the proxy
// token is what most workload clients hold.
func credentials(cl *harness.Cluster) *workload.Credentials {
	sec := cl.Security()
	if sec == nil {
		return nil
	}
	return &workload.Credentials{
		TLS: sec.ClientTLS, ProxyTLS: sec.ProxyTLS,
		Tokens: map[string]string{workload.RoleRead: sec.Token(harness.RoleRead), workload.RoleProxy: sec.Token(harness.RoleProxy),
			workload.RoleAdmin: sec.Token(harness.RoleAdmin)},
		StreamingNode: sec.StreamingNodeDialOptions(),
	}
}
