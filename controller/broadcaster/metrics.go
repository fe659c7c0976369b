package broadcaster

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// Metrics are the broadcaster's Prometheus series (docs/semantics.md#metrics).
// A nil *Metrics records nothing.
type Metrics struct {
	ExecutionDuration   *prometheus.HistogramVec // message_type
	BroadcastDuration   *prometheus.HistogramVec // message_type
	AcquireLockDuration *prometheus.HistogramVec // rk_lock
	AckCallbackDuration *prometheus.HistogramVec // message_type
	CallbackFailures    *prometheus.CounterVec   // message_type
	AppendUnrecoverable *prometheus.CounterVec   // message_type, code
	// PipelinedCreates counts creates proposed while conflicting tasks
	// were still finishing (handoff.go); CreatesReordered counts the
	// REJECT_ORDER refusals among them, each proposed again.
	PipelinedCreates prometheus.Counter
	CreatesReordered prometheus.Counter

	state atomic.Pointer[func() *fsm.State]
	tasks *prometheus.Desc
	// oldest is the age of the oldest unfinished task by state, read
	// against now (the wall clock; tests set it).
	oldest *prometheus.Desc
	now    func() time.Time
}

// NewMetrics creates the series and registers them on reg (when not nil).
// coordd_broadcaster_task_total is computed at scrape time from the FSM
// given by SetStateSource (New sets it to the leader's state).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	buckets := prometheus.ExponentialBucketsRange(0.001, 5, 10)
	h := func(name, help, label string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "coordd_broadcaster_" + name, Help: help, Buckets: buckets}, []string{label})
	}
	m := &Metrics{
		ExecutionDuration: h("task_execution_duration_seconds",
			"Time from a task's admission (or recovery) in this leadership until every target is acked.", "message_type"),
		BroadcastDuration: h("task_broadcast_duration_seconds",
			"Time of a Broadcast call from arrival until its task is tombstoned.", "message_type"),
		AcquireLockDuration: h("task_acquire_lock_duration_seconds",
			"Time a broadcast waited for one resource key.", "rk_lock"),
		AckCallbackDuration: h("task_ack_callback_duration_seconds",
			"Time of a successful CompleteBroadcast (ack callback and tombstone in one command).", "message_type"),
		CallbackFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordd_broadcaster_callback_failures_total",
			Help: "Ack callbacks refused by the state machine (the task stays pending and is retried)."}, []string{"message_type"}),
		AppendUnrecoverable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coordd_broadcaster_append_unrecoverable_total",
			Help: "Appends refused with an error that retrying cannot fix; a non-zero rate is a task that will never complete unless abandoned."},
			[]string{"message_type", "code"}),
		PipelinedCreates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordd_broadcaster_pipelined_creates_total",
			Help: "CreateBroadcast proposals ordered behind conflicting tasks whose completions were still in the log."}),
		CreatesReordered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coordd_broadcaster_creates_reordered_total",
			Help: "Pipelined CreateBroadcast proposals refused because a task they were ordered behind had not finished; each is proposed again once it has."}),
		tasks: prometheus.NewDesc("coordd_broadcaster_task_total",
			"Broadcast tasks in the state machine by message type and state.", []string{"message_type", "state"}, nil),
		oldest: prometheus.NewDesc("coordd_broadcaster_oldest_task_age_seconds",
			"Age of the oldest unfinished broadcast task by state (pending: not every target acked; replicated: acked, its ack callback not yet applied); absent when there is none.",
			[]string{"state"}, nil),
		now: time.Now,
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.ExecutionDuration, m.BroadcastDuration, m.AcquireLockDuration,
			m.AckCallbackDuration, m.CallbackFailures, m.AppendUnrecoverable, m.PipelinedCreates, m.CreatesReordered, taskCollector{m}} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// SetStateSource sets where coordd_broadcaster_task_total reads tasks.
func (m *Metrics) SetStateSource(f func() *fsm.State) {
	if m != nil && f != nil {
		m.state.Store(&f)
	}
}

// StateName is the label spelling of a task state.
func StateName(s logpb.BroadcastState) string {
	switch s {
	case logpb.BroadcastState_BROADCAST_PENDING:
		return "pending"
	case logpb.BroadcastState_BROADCAST_REPLICATED:
		return "replicated"
	case logpb.BroadcastState_BROADCAST_TOMBSTONE:
		return "tombstone"
	}
	return "unknown"
}

type taskCollector struct{ m *Metrics }

func (c taskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.tasks
	ch <- c.m.oldest
}

func (c taskCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.m.state.Load()
	if f == nil {
		return
	}
	st := (*f)()
	if st == nil {
		return
	}
	type key struct{ t, s string }
	counts := map[key]int{}
	oldestMs := map[string]int64{} // state -> smallest created_ms among unfinished tasks
	for _, t := range st.BroadcastTasks() {
		s := StateName(t.State)
		counts[key{t.MessageType, s}]++
		if t.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
			continue
		}
		if ms, ok := oldestMs[s]; !ok || t.CreatedMs < ms {
			oldestMs[s] = t.CreatedMs
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.m.tasks, prometheus.GaugeValue, float64(n), k.t, k.s)
	}
	now := c.m.now().UnixMilli()
	for s, ms := range oldestMs {
		ch <- prometheus.MustNewConstMetric(c.m.oldest, prometheus.GaugeValue, float64(max(now-ms, 0))/1000, s)
	}
}

func (m *Metrics) observeLock(k *logpb.ResourceKey, seconds float64) {
	if m != nil {
		m.AcquireLockDuration.WithLabelValues(lockLabel(k)).Observe(seconds)
	}
}

func (m *Metrics) observeExecution(msgType string, seconds float64) {
	if m != nil {
		m.ExecutionDuration.WithLabelValues(msgType).Observe(seconds)
	}
}

func (m *Metrics) observeBroadcast(msgType string, seconds float64) {
	if m != nil {
		m.BroadcastDuration.WithLabelValues(msgType).Observe(seconds)
	}
}

func (m *Metrics) observeCallback(msgType string, seconds float64) {
	if m != nil {
		m.AckCallbackDuration.WithLabelValues(msgType).Observe(seconds)
	}
}

func (m *Metrics) callbackFailed(msgType string) {
	if m != nil {
		m.CallbackFailures.WithLabelValues(msgType).Inc()
	}
}

func (m *Metrics) appendUnrecoverable(msgType, code string) {
	if m != nil {
		m.AppendUnrecoverable.WithLabelValues(msgType, code).Inc()
	}
}

func (m *Metrics) createPipelined() {
	if m != nil {
		m.PipelinedCreates.Inc()
	}
}

func (m *Metrics) createReordered() {
	if m != nil {
		m.CreatesReordered.Inc()
	}
}
