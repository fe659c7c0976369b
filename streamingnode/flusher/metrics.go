package flusher

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Save kinds, the "kind" label of the binlog metrics.
const (
	kindFlush   = "flush"   // the rows a flush task writes (the segment becomes Flushed)
	kindPartial = "partial" // a growing segment's periodic save (it stays growing)
)

// Error classes, the "class" label of coordd_flusher_errors_total.
const (
	classObjectStore = "object_store" // writing a binlog object failed
	classSave        = "save_binlogs" // SaveBinlogPaths failed (no answer, or refused)
	classStale       = "stale_save"   // SaveBinlogPaths answered stale for a segment still open: recover again
	classAllocID     = "alloc_id"     // no log ID from coordd
	classRecovery    = "recovery"     // listing VChannels or reading recovery information failed
	classWAL         = "wal"          // reading the WAL failed
	classDecode      = "decode"       // an unreadable DML message was skipped
	classTimeTick    = "time_tick"    // a time tick report failed
	classCheckpoint  = "checkpoint"   // a checkpoint update failed
	classOther       = "other"
)

// Metrics are the flusher's Prometheus metrics. The zero of every series
// exists from the start, so a scrape shows every name before any flush.
type Metrics struct {
	binlogs, bytes, rows *prometheus.CounterVec
	flushLatency         prometheus.Histogram
	saveDuration         *prometheus.HistogramVec
	errors               *prometheus.CounterVec
	pendingSegments      prometheus.GaugeFunc
	pendingTasks         prometheus.GaugeFunc
	bufferedRows         prometheus.GaugeFunc
}

// newMetrics builds the metrics; the gauges read m (its channels' last
// published counts) at scrape time.
func newMetrics(m *Manager) *Metrics {
	x := &Metrics{
		binlogs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coordd_flusher_binlogs_written_total",
			Help: "Binlog objects written and recorded with SaveBinlogPaths, by kind (flush, partial)."}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coordd_flusher_binlog_bytes_written_total",
			Help: "Bytes of the binlog objects written and recorded, by kind."}, []string{"kind"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coordd_flusher_rows_written_total",
			Help: "Rows in the binlog objects written and recorded, by kind."}, []string{"kind"}),
		flushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coordd_flusher_flush_duration_seconds",
			Help:    "Time from a flush task reaching the flusher to its SaveBinlogPaths answer.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		saveDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "coordd_flusher_save_duration_seconds",
			Help:    "Time to write one segment's binlog object and record it (SaveBinlogPaths), by kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coordd_flusher_errors_total",
			Help: "Flusher errors by class; most restart the PChannel's flusher from coordd's recovery information."}, []string{"class"}),
	}
	sum := func(f func(c *channel) int64) func() float64 {
		return func() float64 {
			m.mu.Lock()
			defer m.mu.Unlock()
			var n int64
			for _, c := range m.channels {
				n += f(c)
			}
			return float64(n)
		}
	}
	x.pendingSegments = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coordd_flusher_pending_segments",
		Help: "Segments with rows buffered in memory and not yet written, over every PChannel the flusher holds."},
		sum(func(c *channel) int64 { return c.bufferedSegs.Load() }))
	x.pendingTasks = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coordd_flusher_pending_flush_tasks",
		Help: "Flush tasks coordd has given this node's flushers that are not done yet."},
		sum(func(c *channel) int64 { return c.pendingTasks.Load() }))
	x.bufferedRows = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coordd_flusher_buffered_rows",
		Help: "Rows buffered in memory and not yet written, over every PChannel the flusher holds."},
		sum(func(c *channel) int64 { return c.bufferedRows.Load() }))
	for _, k := range []string{kindFlush, kindPartial} {
		x.binlogs.WithLabelValues(k)
		x.bytes.WithLabelValues(k)
		x.rows.WithLabelValues(k)
		x.saveDuration.WithLabelValues(k)
	}
	for _, c := range []string{classObjectStore, classSave, classStale, classAllocID, classRecovery, classWAL,
		classDecode, classTimeTick, classCheckpoint, classOther} {
		x.errors.WithLabelValues(c)
	}
	return x
}

func (x *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{x.binlogs, x.bytes, x.rows, x.flushLatency, x.saveDuration, x.errors,
		x.pendingSegments, x.pendingTasks, x.bufferedRows}
}

// written records one binlog object written and recorded.
func (x *Metrics) written(kind string, bytes, rows int, took time.Duration) {
	x.binlogs.WithLabelValues(kind).Inc()
	x.bytes.WithLabelValues(kind).Add(float64(bytes))
	x.rows.WithLabelValues(kind).Add(float64(rows))
	x.saveDuration.WithLabelValues(kind).Observe(took.Seconds())
}

func (x *Metrics) fail(class string) { x.errors.WithLabelValues(class).Inc() }

// classError tags an error with its metrics class.
type classError struct {
	class string
	err   error
}

func (e *classError) Error() string { return e.err.Error() }
func (e *classError) Unwrap() error { return e.err }

func classed(class string, err error) error {
	if err == nil {
		return nil
	}
	return &classError{class: class, err: err}
}

// classOf is the class of an error that ended a flusher session.
func classOf(err error) string {
	var ce *classError
	if errors.As(err, &ce) {
		return ce.class
	}
	return classOther
}
