package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// DataCollector exports the write path the way Milvus's datacoord does
// (docs/semantics.md#metrics): segments by state and level and checkpoint
// lag per VChannel, computed from the applied state at scrape time, and
// the allocations in the leader's memory.
type DataCollector struct {
	state       func() *fsm.State
	allocations func() int
	now         func() time.Time

	segments, cpLag, allocs *prometheus.Desc
}

// NewDataCollector builds the collector; allocations may be nil.
func NewDataCollector(state func() *fsm.State, allocations func() int, now func() time.Time) *DataCollector {
	if now == nil {
		now = time.Now
	}
	return &DataCollector{state: state, allocations: allocations, now: now,
		segments: prometheus.NewDesc("coordd_datacoord_segment_num", "Segments by state and level.", []string{"state", "level"}, nil),
		cpLag: prometheus.NewDesc("coordd_datacoord_channel_checkpoint_lag_seconds",
			"How far each VChannel's checkpoint is behind this node's clock (dropped VChannels are not listed).", []string{"channel_name"}, nil),
		allocs: prometheus.NewDesc("coordd_datacoord_segment_allocations",
			"Segment allocations in the leader's memory that have not expired (0 on followers).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *DataCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.segments
	ch <- c.cpLag
	ch <- c.allocs
}

// Collect implements prometheus.Collector.
func (c *DataCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.state()
	for s := logpb.SegmentState_SEGMENT_GROWING; s <= logpb.SegmentState_SEGMENT_IMPORTING; s++ {
		for l := logpb.SegmentLevel_LEVEL_L0; l <= logpb.SegmentLevel_LEVEL_L2; l++ {
			ch <- prometheus.MustNewConstMetric(c.segments, prometheus.GaugeValue, float64(st.SegmentCountBy(s, l)),
				fsm.SegmentStateName(s), fsm.SegmentLevelName(l))
		}
	}
	now := c.now().UnixMilli()
	for _, cp := range st.ChannelCheckpoints() {
		if cp.Dropped() {
			continue
		}
		lag := float64(now-fsm.PhysicalMs(cp.Position.Timestamp)) / 1000
		ch <- prometheus.MustNewConstMetric(c.cpLag, prometheus.GaugeValue, max(lag, 0), cp.VChannel)
	}
	n := 0
	if c.allocations != nil {
		n = c.allocations()
	}
	ch <- prometheus.MustNewConstMetric(c.allocs, prometheus.GaugeValue, float64(n))
}

// FlushDurationBuckets span 0.1 s to ~3 h.
var FlushDurationBuckets = prometheus.ExponentialBuckets(0.1, 4, 10)

// RegisterData adds the write-path metrics and returns the observer of
// flush durations (seal → Flushed, seconds).
func (r *Registry) RegisterData(state func() *fsm.State, allocations func() int) (func(time.Duration), error) {
	if err := r.reg.Register(NewDataCollector(state, allocations, nil)); err != nil {
		return nil, err
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coordd_datacoord_segment_flush_duration_seconds",
		Help: "Time from a segment's seal to Flushed, observed on the leader.", Buckets: FlushDurationBuckets})
	if err := r.reg.Register(h); err != nil {
		return nil, err
	}
	return func(d time.Duration) { h.Observe(d.Seconds()) }, nil
}
