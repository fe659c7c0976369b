package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

// channelCollector exports channel management the way Milvus's streamingcoord
// does (docs/semantics.md#metrics), computed from the applied state at scrape
// time so no series is ever stale.
type channelCollector struct {
	node     *raftnode.Node
	watchers func() int64

	pchannelInfo, vchannelTotal, assignVersion, listeners, nodeInfo *prometheus.Desc
}

// RegisterChannels adds the channel-management metrics.
func (r *Registry) RegisterChannels(node *raftnode.Node, watchers func() int64) error {
	c := &channelCollector{
		node: node, watchers: watchers,
		pchannelInfo: prometheus.NewDesc("coordd_streamingcoord_pchannel_info",
			"One series per PChannel (value 1) with its term, streaming node and state.",
			[]string{"channel_name", "term", "streaming_node", "state"}, nil),
		vchannelTotal: prometheus.NewDesc("coordd_streamingcoord_vchannel_total",
			"VChannels placed on each PChannel.", []string{"channel_name", "streaming_node"}, nil),
		assignVersion: prometheus.NewDesc("coordd_streamingcoord_assignment_info",
			"Current assignment version (Local part); label global is the Global part.", []string{"global"}, nil),
		listeners: prometheus.NewDesc("coordd_streamingcoord_assignment_listener_total",
			"Open assignment watch streams on this node.", nil, nil),
		nodeInfo: prometheus.NewDesc("coordd_streamingcoord_streaming_node_info",
			"One series per known streaming node (value 1) with its state.", []string{"node_id", "address", "state"}, nil),
	}
	return r.reg.Register(c)
}

func (c *channelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pchannelInfo
	ch <- c.vchannelTotal
	ch <- c.assignVersion
	ch <- c.listeners
	ch <- c.nodeInfo
}

func (c *channelCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.node.State()
	for _, p := range st.PChannels() {
		node := strconv.FormatUint(p.NodeId, 10)
		ch <- prometheus.MustNewConstMetric(c.pchannelInfo, prometheus.GaugeValue, 1,
			p.Name, strconv.FormatInt(p.Term, 10), node, p.State.String())
		ch <- prometheus.MustNewConstMetric(c.vchannelTotal, prometheus.GaugeValue, float64(st.VChannelCount(p.Name)), p.Name, node)
	}
	for _, n := range st.StreamingNodes() {
		if n.State == logpb.NodeState_NODE_DOWN {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.nodeInfo, prometheus.GaugeValue, 1, strconv.FormatUint(n.Id, 10), n.Address, n.State.String())
	}
	v := st.AssignmentVersion()
	ch <- prometheus.MustNewConstMetric(c.assignVersion, prometheus.GaugeValue, float64(v.Local), strconv.FormatUint(v.Global, 10))
	ch <- prometheus.MustNewConstMetric(c.listeners, prometheus.GaugeValue, float64(c.watchers()))
}
