package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/api/metrics"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/testutil"
)

// scrape serves the registry once and returns every unlabelled sample.
func scrape(t *testing.T, reg *metrics.Registry) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics = %d: %s", rec.Code, rec.Body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(rec.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// TestRegistry starts a one-member cluster (the only metrics.New of this
// test binary: it installs go-metrics' process-wide sink) and checks the
// gauges follow the node, before and after a snapshot.
func TestRegistry(t *testing.T) {
	_, trans := raft.NewInmemTransport("127.0.0.1:1")
	node, err := raftnode.Open(raftnode.Config{ID: "m1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:1", Transport: trans,
		StateBudget: 1 << 20})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer func() {
		if err := node.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	reg, err := metrics.New(node)
	if err != nil {
		t.Fatalf("metrics.New: %v", err)
	}
	node.SetProposeObserver(func(d time.Duration) { reg.ApplyLatency.Observe(d.Seconds()) })
	node.SetApplyObserver(func(uint64, int) { reg.Applied.Inc() })

	if v := scrape(t, reg)["coordd_is_leader"]; v != 0 {
		t.Errorf("coordd_is_leader = %v before any election; want 0", v)
	}
	if err := node.Bootstrap([]raftnode.Peer{{ID: "m1", RaftAddr: "127.0.0.1:1"}}); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	testutil.EventuallyWithin(t, 15*time.Second, "an established leader", func() bool { return node.EstablishedTerm() != 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	member := &logpb.Member{Id: "m1", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:2", HttpAddr: "127.0.0.1:3"}
	if res, err := commands.Propose(ctx, node, &logpb.UpsertMember{Member: member}, "req-1"); err != nil || res.Rejection != nil {
		t.Fatalf("propose: %v %v", err, res)
	}

	m := scrape(t, reg)
	applied := float64(node.State().AppliedIndex())
	for name, want := range map[string]float64{
		"coordd_is_leader":                  1,
		"coordd_fsm_members":                1,
		"coordd_fsm_request_ids":            1,
		"coordd_raft_term":                  float64(node.Raft().CurrentTerm()),
		"coordd_last_snapshot_index":        0,
		"coordd_snapshot_age_seconds":       -1,
		"coordd_raft_state_leader":          1, // from raft, through go-metrics
		"coordd_storage_disk_full":          0,
		"coordd_state_budget_bytes":         1 << 20,
		"coordd_state_budget_refused_total": 0,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v); want %v", name, got, ok, want)
		}
	}
	if got := m["coordd_state_bytes"]; got <= 0 || got >= 1<<20 {
		t.Errorf("coordd_state_bytes = %v; want the small state's size, above 0 and under the budget", got)
	}
	if got := m["coordd_fsm_applied_index"]; got < 1 || got > applied {
		t.Errorf("coordd_fsm_applied_index = %v; want in 1..%v", got, applied)
	}
	if got := m["coordd_propose_duration_seconds_count"]; got < 1 {
		t.Errorf("coordd_propose_duration_seconds_count = %v; want >= 1", got)
	}
	if got := m["coordd_fsm_applied_entries_total"]; got < 2 { // LeaderEstablished and UpsertMember at least
		t.Errorf("coordd_fsm_applied_entries_total = %v; want >= 2", got)
	}

	// A leadership check without a lease is a quorum round.
	before, _ := node.VerifyStats()
	if err := node.VerifyLeader(ctx); err != nil {
		t.Fatalf("VerifyLeader: %v", err)
	}
	rec := httptest.NewRecorder()
	reg.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := fmt.Sprintf(`coordd_leader_checks_total{how="quorum_round"} %d`, before+1); !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics has no %q", want)
	}
	for _, write := range []string{"term_and_vote", "raft_log", "snapshot"} {
		if want := `coordd_storage_write_failing{write="` + write + `"} 0`; !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics has no %q", want)
		}
	}

	if err := node.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	m = scrape(t, reg)
	idx, _, _ := node.LastSnapshot()
	if got := m["coordd_last_snapshot_index"]; idx == 0 || got != float64(idx) {
		t.Errorf("coordd_last_snapshot_index = %v; want the snapshot's index %d", got, idx)
	}
	if age := m["coordd_snapshot_age_seconds"]; age < 0 || age > 60 {
		t.Errorf("coordd_snapshot_age_seconds = %v right after a snapshot; want 0..60", age)
	}
}
