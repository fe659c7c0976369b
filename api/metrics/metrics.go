// Package metrics builds a node's Prometheus registry: raft's and
// raft-boltdb's own metrics (through a hashicorp/go-metrics Prometheus sink;
// build with -tags hashicorpmetrics so both libraries report to it), Go and
// process collectors, and coordd's gauges and histograms.
package metrics

import (
	"fmt"
	"net/http"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coordd/coordd/raftnode"
)

// Registry is one node's metrics.
type Registry struct {
	reg          *prometheus.Registry
	ApplyLatency prometheus.Histogram
	Applied      prometheus.Counter
	// HandlerPanics counts API handler panics that were recovered
	// (labels: surface grpc|http, method).
	HandlerPanics *prometheus.CounterVec
}

// New registers every collector for node. go-metrics keeps one process-wide
// sink (a property of that library, used by raft); New installs it, so call
// it once per process.
func New(node *raftnode.Node) (*Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: reg, Expiration: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("raft metrics sink: %w", err)
	}
	conf := gometrics.DefaultConfig("coordd")
	conf.EnableHostname = false
	conf.EnableRuntimeMetrics = false
	if _, err := gometrics.NewGlobal(conf, sink); err != nil {
		return nil, fmt.Errorf("install raft metrics sink: %w", err)
	}

	r := &Registry{
		reg: reg,
		ApplyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "coordd_propose_duration_seconds",
			Help:    "Time from proposing a command on the leader to its result (committed and applied).",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		Applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordd_fsm_applied_entries_total",
			Help: "Log entries applied to this node's state machine.",
		}),
		HandlerPanics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordd_handler_panics_total",
			Help: "API handler panics recovered (answered Internal; the process kept serving). Any increase is a bug.",
		}, []string{"surface", "method"}),
	}
	reg.MustRegister(r.ApplyLatency, r.Applied, r.HandlerPanics)
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("coordd_fsm_applied_index", "Raft index of the last entry applied to the state machine.",
		func() float64 { return float64(node.State().AppliedIndex()) })
	gauge("coordd_fsm_members", "Members recorded in the state machine.",
		func() float64 { return float64(len(node.State().Members())) })
	gauge("coordd_fsm_request_ids", "Request IDs remembered for retry deduplication.",
		func() float64 { return float64(node.State().DedupLen()) })
	gauge("coordd_raft_term", "Current raft term.", func() float64 { return float64(node.Raft().CurrentTerm()) })
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coordd_raft_log_appends_total",
		Help: "Successful appends to this member's raft log (each one bolt transaction or one raft-wal fsync, whichever --raft-log-store is)."},
		func() float64 { return float64(node.LogWrites()) }))
	// How leadership checks (VerifyLeader: every allocation and lease
	// read) were answered: a lease that lapses between renewals shows as
	// quorum rounds, each a network round trip the caller waits for.
	for how, f := range map[string]func() float64{
		"quorum_round": func() float64 { rounds, _ := node.VerifyStats(); return float64(rounds) },
		"lease":        func() float64 { _, leased := node.VerifyStats(); return float64(leased) },
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coordd_leader_checks_total",
			Help:        "Leadership checks (allocations, linearizable reads) by how they were answered: from the leader lease, or by a quorum round.",
			ConstLabels: prometheus.Labels{"how": how}}, f))
	}
	gauge("coordd_is_leader", "1 if this node is the established leader.", func() float64 {
		if node.EstablishedTerm() != 0 {
			return 1
		}
		return 0
	})
	gauge("coordd_snapshot_age_seconds", "Seconds since the newest raft snapshot was written (-1: none yet).", func() float64 {
		_, at, ok := node.LastSnapshot()
		if !ok {
			return -1
		}
		return time.Since(at).Seconds()
	})
	gauge("coordd_last_snapshot_index", "Raft index of the newest snapshot (0: none yet).", func() float64 {
		idx, _, _ := node.LastSnapshot()
		return float64(idx)
	})
	registerStorage(reg, node)
	registerStateSize(reg, node)
	return r, nil
}

// Registerer lets other packages add their collectors.
func (r *Registry) Registerer() prometheus.Registerer { return r.reg }

// Handler serves the registry in the Prometheus text format.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{})
}
