package manifest

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the manifest committer's Prometheus series
// (docs/semantics.md#manifest-metrics). A nil *Metrics records nothing.
type Metrics struct {
	LockWait        prometheus.Histogram
	LockHold        prometheus.Histogram
	Outcomes        *prometheus.CounterVec // class
	StaleRejections prometheus.Counter
	OrphansFound    prometheus.Counter
	OrphansRemoved  prometheus.Counter
	// Pipelined counts commands proposed while a predecessor on one of
	// their segments was still in flight (built on its tail); Retries
	// counts attempts retried after such a command was refused, by
	// reason (base_moved, retired, expected_version).
	Pipelined prometheus.Counter
	Retries   *prometheus.CounterVec
}

// NewMetrics creates the series and registers them on reg (when not nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	buckets := prometheus.ExponentialBucketsRange(0.0001, 30, 12)
	m := &Metrics{
		LockWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coordd_manifest_lock_wait_seconds",
			Help: "Time a manifest commit waited for its segment locks.", Buckets: buckets}),
		LockHold: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coordd_manifest_lock_hold_seconds",
			Help: "Time a manifest commit held its segment locks (revision I/O until its command is queued).", Buckets: buckets}),
		Outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coordd_manifest_commits_total",
			Help: "Manifest commits (single and batch) by outcome class: ok, stale, not_found, invalid, canceled, error."}, []string{"class"}),
		StaleRejections: prometheus.NewCounter(prometheus.CounterOpts{Name: "coordd_manifest_stale_rejections_total",
			Help: "Manifest publications the state machine refused as stale (the written revision became an orphan)."}),
		OrphansFound: prometheus.NewCounter(prometheus.CounterOpts{Name: "coordd_manifest_orphans_found_total",
			Help: "Unpublished manifest revisions past the grace period found by the collector."}),
		OrphansRemoved: prometheus.NewCounter(prometheus.CounterOpts{Name: "coordd_manifest_orphans_removed_total",
			Help: "Unpublished manifest revisions the collector deleted."}),
		Pipelined: prometheus.NewCounter(prometheus.CounterOpts{Name: "coordd_manifest_pipelined_total",
			Help: "Manifest commit commands built on a predecessor still in flight on the same segment (pipelined)."}),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coordd_manifest_retries_total",
			Help: "Pipelined manifest commit attempts refused because their predecessor did not apply, and retried, by reason: base_moved, retired, expected_version."}, []string{"reason"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.LockWait, m.LockHold, m.Outcomes, m.StaleRejections, m.OrphansFound, m.OrphansRemoved, m.Pipelined, m.Retries} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *Metrics) lockWait(d time.Duration) {
	if m != nil {
		m.LockWait.Observe(d.Seconds())
	}
}

func (m *Metrics) lockHold(d time.Duration) {
	if m != nil {
		m.LockHold.Observe(d.Seconds())
	}
}

func (m *Metrics) outcome(err error) {
	if m != nil {
		m.Outcomes.WithLabelValues(Class(err)).Inc()
	}
}

func (m *Metrics) staleRejection() {
	if m != nil {
		m.StaleRejections.Inc()
	}
}

func (m *Metrics) orphans(found, removed int) {
	if m != nil {
		m.OrphansFound.Add(float64(found))
		m.OrphansRemoved.Add(float64(removed))
	}
}

func (m *Metrics) pipelined() {
	if m != nil {
		m.Pipelined.Inc()
	}
}

func (m *Metrics) retried(reason string) {
	if m != nil {
		m.Retries.WithLabelValues(reason).Inc()
	}
}
