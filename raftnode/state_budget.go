package raftnode

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// The memory guard (docs/operations.md#memory-guard): admission control on
// the leader that refuses, before proposing, the commands that grow the
// state (commands.Grows) once the state's size reaches Config.StateBudget.
// A refused command was never proposed: nothing was done. Every other
// command passes whatever the size, so drops, flushes, checkpoints and acks
// keep working at the limit and bring the state back under it.
//
// The size is the state's snapshot encoding in bytes (what a snapshot
// file, a backup and a new member's catch-up carry; a member's heap holds
// about twice that). Encoding the whole state on every proposal would cost
// as much as a snapshot, so the guard estimates it: the state's record
// count (constant time, fsm.State.RecordCount) times the bytes per record
// of the last full measurement. The count follows creations and drops at
// once; the bytes per record follow the records' contents (binlog paths
// added to existing segments) at the next measurement, which runs in the
// background when a proposal or a reading of the size finds the last one
// older than Config.StateMeasureInterval, and no more often than one
// measurement's duration × measureDutyFactor, so the guard costs the leader
// at most about 1/measureDutyFactor of a core at any state size.

// ErrStateBudget is wrapped by every *StateBudgetError.
var ErrStateBudget = vocab.NewSentinel(vocab.ClassExhausted, "state budget reached")

// StateBudgetError refuses a command that grows the state while the state
// is at or over its budget. Nothing was done.
type StateBudgetError struct {
	Type   commands.Type
	Bytes  int64 // the state's estimated size
	Budget int64 // Config.StateBudget
}

func (e *StateBudgetError) Error() string {
	return fmt.Sprintf("%v: %s refused, nothing was done: the state is %s (estimated), at or over its budget of %s (--state-budget). "+
		"Drops, flushes, checkpoints and acks still work and free it: drop collections and let their dropped segments be purged, "+
		"let finished broadcasts be pruned, revoke unused tokens, or raise --state-budget (docs/operations.md#memory-guard)",
		ErrStateBudget, e.Type, vocab.FormatBytes(e.Bytes), vocab.FormatBytes(e.Budget))
}

// Is makes errors.Is(err, ErrStateBudget) true.
func (e *StateBudgetError) Is(target error) bool {
	return target == ErrStateBudget || errors.Is(ErrStateBudget, target)
}

// StateSize is the state's estimated size against the budget.
type StateSize struct {
	Bytes   int64 // estimated encoded size of the state
	Records uint64
	Budget  int64 // 0: the guard is off
	// Measured is when the bytes per record were last measured (zero:
	// not yet; the estimate uses defaultBytesPerRecord).
	Measured time.Time
	Refused  uint64 // commands the guard refused since this node started
}

const (
	// DefaultStateMeasureInterval is Config.StateMeasureInterval's default.
	DefaultStateMeasureInterval = 10 * time.Second
	// measureDutyFactor spaces measurements by at least this many times
	// the last one's duration (a 1M-segment state takes about a second).
	measureDutyFactor = 20
	// defaultBytesPerRecord stands in until the first measurement: about
	// a segment record with a few binlog paths.
	defaultBytesPerRecord = 256
)

// measurement is one full encoding of the state.
type measurement struct {
	bytes, records uint64
	at             time.Time
}

// stateGauge estimates the state's size and holds the guard's counters.
// Its hot path (estimate, due) is a few atomic loads and one clock read.
type stateGauge struct {
	budget   int64
	interval time.Duration
	now      func() time.Time
	state    func() *fsm.State

	last      atomic.Pointer[measurement]
	nextAt    atomic.Int64 // unix nanos before which no measurement starts
	measuring atomic.Bool
	refused   atomic.Uint64
}

func newStateGauge(budget int64, interval time.Duration, now func() time.Time, state func() *fsm.State) *stateGauge {
	if interval <= 0 {
		interval = DefaultStateMeasureInterval
	}
	return &stateGauge{budget: budget, interval: interval, now: now, state: state}
}

// size is the current estimate, starting a background measurement when
// one is due.
func (g *stateGauge) size() StateSize {
	g.maybeMeasure()
	st := g.state()
	out := StateSize{Records: st.RecordCount(), Budget: g.budget, Refused: g.refused.Load()}
	if m := g.last.Load(); m != nil && m.records > 0 {
		out.Bytes, out.Measured = int64(out.Records*m.bytes/m.records), m.at
	} else {
		out.Bytes = int64(out.Records * defaultBytesPerRecord)
	}
	return out
}

// admit returns a *StateBudgetError for a command that grows the state
// while the state is at or over the budget, nil for anything else.
func (g *stateGauge) admit(c commands.Command) error {
	if g.budget <= 0 {
		return nil
	}
	s := g.size()
	if s.Bytes < g.budget || !commands.Grows(c) {
		return nil
	}
	g.refused.Add(1)
	return &StateBudgetError{Type: c.Type, Bytes: s.Bytes, Budget: g.budget}
}

// maybeMeasure starts one background measurement if the last one is older
// than the interval; at most one runs at a time.
func (g *stateGauge) maybeMeasure() {
	if g.now().UnixNano() < g.nextAt.Load() || !g.measuring.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer g.measuring.Store(false)
		g.measure()
	}()
}

// measure encodes the current state into a counter (the cost of writing a
// snapshot without its I/O; the state is immutable, so nothing waits).
func (g *stateGauge) measure() {
	st := g.state()
	start := g.now()
	var cw countingWriter
	if err := st.WriteSnapshot(&cw); err != nil {
		// A counter never fails; keep the previous figure if it did.
		g.nextAt.Store(g.now().Add(g.interval).UnixNano())
		return
	}
	end := g.now()
	g.last.Store(&measurement{bytes: cw.n, records: st.RecordCount(), at: end})
	g.nextAt.Store(end.Add(max(g.interval, measureDutyFactor*end.Sub(start))).UnixNano())
}

type countingWriter struct{ n uint64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += uint64(len(p))
	return len(p), nil
}

// StateSize is the state's estimated size against Config.StateBudget
// (docs/operations.md#memory-guard). Reading it may start a background
// measurement.
func (n *Node) StateSize() StateSize { return n.gauge.size() }
