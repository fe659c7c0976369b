package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// storageWrites are the kinds of durable write a member reports on, with
// their label values in coordd_storage_write_failing.
var storageWrites = map[string]string{
	datadir.WriteTermVote: "term_and_vote",
	datadir.WriteLog:      "raft_log",
	datadir.WriteSnapshot: "snapshot",
}

// registerStorage adds the gauges of the member's durable writes
// (docs/operations.md#full-disk): whether its disk is full, and which kind
// of write keeps failing. Both read raftnode's fault state on each scrape.
func registerStorage(reg prometheus.Registerer, node *raftnode.Node) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coordd_storage_disk_full",
		Help: "1 while a durable write of this member (term and vote, raft log, snapshot) fails because its disk is full; /readyz says which."},
		func() float64 { return boolGauge(node.DiskFull()) }))
	for write, label := range storageWrites {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coordd_storage_write_failing",
			Help:        "1 while this kind of durable write keeps failing (term_and_vote: the member takes no part in the cluster until it succeeds).",
			ConstLabels: prometheus.Labels{"write": label}},
			func() float64 {
				for _, f := range node.StorageFaults() {
					if f.Write == write {
						return 1
					}
				}
				return 0
			}))
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
