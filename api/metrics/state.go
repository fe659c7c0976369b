package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/raftnode"
)

// registerStateSize exports the memory guard's figures
// (docs/operations.md#memory-guard): the state's estimated size, its
// budget and the commands the guard refused. Reading the size may start
// the guard's background measurement when the last one is old.
func registerStateSize(reg *prometheus.Registry, node *raftnode.Node) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coordd_state_bytes",
			Help: "Estimated encoded size of the replicated state (what a snapshot holds; the heap holds about twice that)."},
			func() float64 { return float64(node.StateSize().Bytes) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coordd_state_budget_bytes",
			Help: "The memory guard's budget (--state-budget); commands that grow the state are refused at or over it. 0: off."},
			func() float64 { return float64(node.StateSize().Budget) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "coordd_state_budget_refused_total",
			Help: "Commands the memory guard refused because the state was at or over its budget."},
			func() float64 { return float64(node.StateSize().Refused) }),
	)
}
