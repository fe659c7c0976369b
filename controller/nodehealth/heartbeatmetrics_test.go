package nodehealth

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrape gathers reg and returns the TTL gauge and the heartbeat ages by
// node_id.
func scrape(t *testing.T, reg *prometheus.Registry) (ttlSeconds float64, ages map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ttlSeconds, ages = -1, map[string]float64{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "coordd_streamingcoord_node_ttl_seconds":
			ttlSeconds = mf.GetMetric()[0].GetGauge().GetValue()
		case "coordd_streamingcoord_node_heartbeat_age_seconds":
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["address"] == "" {
					t.Errorf("heartbeat age of node %s has no address label", labels["node_id"])
				}
				ages[labels["node_id"]] = m.GetGauge().GetValue()
			}
		}
	}
	return ttlSeconds, ages
}

func id(n uint64) string { return strconv.FormatUint(n, 10) }

// TestHeartbeatAgeMetrics: the leader exports each live node's heartbeat
// age from the tracker's clock and the TTL; a node marked DOWN has no age;
// a member that does not lead, or whose tracker stopped, exports the TTL
// only (its sessions are not current).
func TestHeartbeatAgeMetrics(t *testing.T) {
	tr, leader, clock := newTracker(t)
	var leading atomic.Bool
	reg := prometheus.NewRegistry()
	if err := tr.RegisterMetrics(reg, leading.Load); err != nil {
		t.Fatal(err)
	}
	n1 := register(t, leader, "10.0.0.1:1001")
	n2 := register(t, leader, "10.0.0.2:1002")

	if ttlS, ages := scrape(t, reg); ttlS != ttl.Seconds() || len(ages) != 0 {
		t.Fatalf("before leading: ttl %v ages %v, want %v and none", ttlS, ages, ttl.Seconds())
	}

	leading.Store(true)
	stop := startRun(t, tr, clock, 3)
	advance(t, tr, clock, 300*time.Millisecond)
	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	advance(t, tr, clock, 300*time.Millisecond)
	_, ages := scrape(t, reg)
	if len(ages) != 2 || ages[id(n1.Id)] != 0.6 || ages[id(n2.Id)] != 0.3 {
		t.Fatalf("ages %v, want node %d 0.6s and node %d 0.3s", ages, n1.Id, n2.Id)
	}

	// Past the TTL n1 is DOWN: no age for it; n2 keeps beating.
	tr.Heartbeat(n2.Id, n2.Epoch, rv(n2))
	advance(t, tr, clock, 500*time.Millisecond)
	_, ages = scrape(t, reg)
	if _, ok := ages[id(n1.Id)]; ok || len(ages) != 1 || ages[id(n2.Id)] != 0.5 {
		t.Fatalf("ages %v after node %d went DOWN, want only node %d at 0.5s", ages, n1.Id, n2.Id)
	}

	// Leadership lost: no ages even with sessions still in memory.
	leading.Store(false)
	if _, ages := scrape(t, reg); len(ages) != 0 {
		t.Fatalf("ages %v on a member that does not lead", ages)
	}
	// The tracker stopped (a member that has not yet seen its loss): its
	// sessions go stale and are not exported once its last check is old.
	leading.Store(true)
	stop()
	clock.Advance(tr.staleAfter() + time.Millisecond)
	if _, ages := scrape(t, reg); len(ages) != 0 {
		t.Fatalf("ages %v from a tracker that stopped %v ago", ages, tr.staleAfter())
	}
}
