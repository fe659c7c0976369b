package broadcaster

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/testutil"
)

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// counterValue returns the value of the series name{labels} (counter or
// gauge value, histogram sample count), or 0 when absent.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, labels) {
				continue
			}
			if v := testutil.SampleValue(m); v >= 0 {
				return v
			}
		}
	}
	return 0
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, lp := range m.GetLabel() {
		got[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func TestNewMetricsRegistersOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatalf("registering twice succeeded")
	}
	// Without a state source the task gauge is simply absent.
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	// A nil *Metrics records nothing and does not panic.
	var m *Metrics
	m.observeLock(clusterKey(true), 1)
	m.callbackFailed("x")
	m.SetStateSource(nil)
	if _, err := NewMetrics(nil); err != nil {
		t.Fatal(err)
	}
}

// TestOldestTaskAge: coordd_broadcaster_oldest_task_age_seconds is the age
// of the oldest unfinished task by state, from the tasks' created_ms and
// the collector's clock; a finished (tombstoned) task does not count, and
// with nothing unfinished the series is absent.
func TestOldestTaskAge(t *testing.T) {
	h := newHarness(t, nil) // the manager is not run: tasks stay as proposed
	clock, leader := h.clock, h.leader
	reg := newRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.now = clock.Now
	m.SetStateSource(leader.State)
	age := func(state string) (float64, bool) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "coordd_broadcaster_oldest_task_age_seconds" {
				for _, s := range mf.GetMetric() {
					if labelsMatch(s, map[string]string{"state": state}) {
						return s.GetGauge().GetValue(), true
					}
				}
			}
		}
		return 0, false
	}
	if v, ok := age("pending"); ok {
		t.Fatalf("oldest pending age %v with no tasks, want absent", v)
	}
	first := leader.MustPropose(t, &logpb.CreateBroadcast{MessageType: "AlterCollection", Vchannels: []string{h.cch}}).GetBroadcast().GetBroadcastId()
	clock.Advance(90 * time.Second)
	leader.MustPropose(t, &logpb.CreateBroadcast{MessageType: "CreateIndex", Vchannels: []string{h.cch}})
	clock.Advance(30 * time.Second)
	if v, ok := age("pending"); !ok || v != 120 {
		t.Fatalf("oldest pending age %v (present %v), want 120", v, ok)
	}
	leader.MustPropose(t, &logpb.AbandonBroadcast{BroadcastId: first, Reason: "test"})
	if v, ok := age("pending"); !ok || v != 30 {
		t.Fatalf("oldest pending age %v (present %v) after the oldest was abandoned, want 30", v, ok)
	}
	if v, ok := age("tombstone"); ok {
		t.Fatalf("a finished task has an age (%v): only unfinished tasks count", v)
	}
}
