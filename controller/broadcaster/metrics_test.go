package broadcaster

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
