package nodehealth

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/commands/logpb"
)

// Heartbeat metrics (docs/operations.md#monitoring): the leader exports how
// long ago each live streaming node last heartbeated, and every member
// exports the TTL, so one alert rule ("silent past half the TTL") holds
// for any --node-ttl without a threshold of its own.
//
// Heartbeats are leader memory, so only a member whose tracker is running
// exports ages: the caller's leading() must say this member leads, and the
// tracker must have finished an expiry check within staleAfter of now
// (its ticker runs every TTL/40). A member that lost leadership keeps its
// last sessions in memory; the check keeps their ever-growing ages off
// /metrics, where they would read as silent nodes. A member that wins
// again within staleAfter may export its old sessions until its Reset
// (milliseconds); those ages are then under staleAfter plus one
// heartbeat interval, below the alert's half TTL at the default interval.

// staleAfter is how old the tracker's last check may be for its sessions
// to count as current.
func (t *Tracker) staleAfter() time.Duration { return t.cfg.TTL / 4 }

type heartbeatCollector struct {
	t       *Tracker
	leading func() bool

	age, ttl *prometheus.Desc
}

// RegisterMetrics adds coordd_streamingcoord_node_heartbeat_age_seconds
// (per live node, on the leader) and coordd_streamingcoord_node_ttl_seconds
// to reg. leading reports whether this member is the established leader.
func (t *Tracker) RegisterMetrics(reg prometheus.Registerer, leading func() bool) error {
	return reg.Register(&heartbeatCollector{t: t, leading: leading,
		age: prometheus.NewDesc("coordd_streamingcoord_node_heartbeat_age_seconds",
			"Seconds since each live (UP or draining) streaming node last heartbeated to this leader; only the leader knows, so only it exports the series.",
			[]string{"node_id", "address"}, nil),
		ttl: prometheus.NewDesc("coordd_streamingcoord_node_ttl_seconds",
			"The streaming-node session TTL (--node-ttl): a node silent for longer is marked DOWN and its PChannels move.", nil, nil),
	})
}

func (c *heartbeatCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.age
	ch <- c.ttl
}

func (c *heartbeatCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.ttl, prometheus.GaugeValue, c.t.cfg.TTL.Seconds())
	for _, a := range c.t.heartbeatAges(c.leading) {
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, a.age.Seconds(), strconv.FormatUint(a.id, 10), a.address)
	}
}

type heartbeatAge struct {
	id      uint64
	address string
	age     time.Duration
}

// heartbeatAges lists the age of the last heartbeat of every live node
// with a session at its current epoch, or nothing when the tracker is not
// running as leader (see the file comment).
func (t *Tracker) heartbeatAges(leading func() bool) []heartbeatAge {
	if leading == nil || !leading() {
		return nil
	}
	now := t.cfg.Clock.Now()
	if now.Sub(time.Unix(0, t.checkedAt.Load())) > t.staleAfter() {
		return nil
	}
	nodes := t.leader.State().StreamingNodes()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []heartbeatAge
	for _, n := range nodes {
		if n.State == logpb.NodeState_NODE_DOWN {
			continue
		}
		s, ok := t.sessions[n.Id]
		if !ok || s.epoch != n.Epoch {
			continue
		}
		out = append(out, heartbeatAge{id: n.Id, address: n.Address, age: max(now.Sub(s.lastSeen), 0)})
	}
	return out
}
