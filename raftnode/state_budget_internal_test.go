package raftnode

import (
	"bytes"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// withTokens is st with tokens [from, to) created.
func withTokens(t *testing.T, st *fsm.State, from, to int) *fsm.State {
	t.Helper()
	for i := from; i < to; i++ {
		c := commands.MustNew(&logpb.CreateToken{Token: &logpb.TokenRecord{Id: fmt.Sprintf("%016x", i), Name: "n",
			Role: logpb.TokenRole_TOKEN_ROLE_READ, SecretSha256: make([]byte, 32)}})
		next, res, err := st.ApplyCommands(st.AppliedIndex()+1, c)
		if err != nil || res[0].Rejection != nil {
			t.Fatalf("token %d: %v %v", i, err, res)
		}
		st = next
	}
	return st
}

func encodedSize(t *testing.T, st *fsm.State) int64 {
	t.Helper()
	var b bytes.Buffer
	if err := st.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return int64(b.Len())
}

// The estimate is the record count times the last measurement's bytes per
// record (defaultBytesPerRecord before one), a measurement becomes due
// after the interval, and measurements are spaced by at least
// measureDutyFactor times their own duration.
func TestStateGaugeEstimateAndMeasurement(t *testing.T) {
	// The clock moves by tick at each reading; atomic, since a background
	// measurement reads it.
	var nowNs, tick atomic.Int64
	nowNs.Store(time.Unix(1_700_000_000, 0).UnixNano())
	clock := func() time.Time { return time.Unix(0, nowNs.Add(tick.Load())) }
	now := func() time.Time { return time.Unix(0, nowNs.Load()) }
	st := withTokens(t, fsm.New(), 0, 10)
	g := newStateGauge(1<<20, 10*time.Second, clock, func() *fsm.State { return st })
	g.nextAt.Store(math.MaxInt64) // no background measurement yet

	if s := g.size(); s.Bytes != int64(st.RecordCount())*defaultBytesPerRecord || !s.Measured.IsZero() {
		t.Fatalf("before a measurement: %+v, want %d records × %d", s, st.RecordCount(), defaultBytesPerRecord)
	}
	g.measure()
	first := encodedSize(t, st)
	if s := g.size(); s.Bytes != first || !s.Measured.Equal(now()) {
		t.Fatalf("after measuring: %+v, want exactly %d bytes measured at %v", s, first, now())
	}
	if got := time.Unix(0, g.nextAt.Load()); !got.Equal(now().Add(10 * time.Second)) {
		t.Fatalf("next measurement due at %v, want %v", got, now().Add(10*time.Second))
	}

	// More records: the estimate follows the count at the measured rate.
	st = withTokens(t, st, 10, 40)
	want := int64(st.RecordCount()) * first / int64(g.last.Load().records)
	if s := g.size(); s.Bytes != want {
		t.Fatalf("estimate %d, want %d", s.Bytes, want)
	}

	// Due after the interval: the reading starts one in the background.
	nowNs.Add(int64(10 * time.Second))
	g.size()
	deadline := time.Now().Add(10 * time.Second)
	for !g.last.Load().at.Equal(now()) || g.measuring.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the due measurement did not run")
		}
		time.Sleep(time.Millisecond)
	}
	if s := g.size(); s.Bytes != encodedSize(t, st) {
		t.Fatalf("after the due measurement: %d, want %d", s.Bytes, encodedSize(t, st))
	}

	// A measurement that took 1 s delays the next one by 20 s, not 10 s.
	tick.Store(int64(time.Second))
	g.measure()
	tick.Store(0)
	if got, want := time.Unix(0, g.nextAt.Load()), now().Add(measureDutyFactor*time.Second); !got.Equal(want) {
		t.Fatalf("after a 1 s measurement the next is due at %v, want %v", got, want)
	}
}

// The guard refuses only commands that grow the state, only at or over the
// budget, and never when the budget is 0.
func TestStateGaugeAdmit(t *testing.T) {
	st := withTokens(t, fsm.New(), 0, 10)
	clock := func() time.Time { return time.Unix(1_700_000_000, 0) }
	grow := commands.MustNew(&logpb.AllocVirtualChannels{CollectionId: 1, Count: 1})
	keep := commands.MustNew(&logpb.DropVirtualChannels{CollectionId: 1})
	size := encodedSize(t, st)
	for _, tc := range []struct {
		budget    int64
		cmd       commands.Command
		refused   bool
		situation string
	}{
		{size, grow, true, "growth at the budget"},
		{size + 1, grow, false, "growth under the budget"},
		{size, keep, false, "a drop at the budget"},
		{1, keep, false, "a drop far over the budget"},
		{0, grow, false, "growth with the guard off"},
	} {
		g := newStateGauge(tc.budget, time.Hour, clock, func() *fsm.State { return st })
		g.nextAt.Store(math.MaxInt64)
		g.measure()
		err := g.admit(tc.cmd)
		if (err != nil) != tc.refused {
			t.Errorf("%s: admit = %v, want refused %v", tc.situation, err, tc.refused)
		}
	}
}

// BenchmarkStateGaugeAdmit is the guard's cost on one proposal: a clock
// reading, a few atomic loads and the record count (constant time).
func BenchmarkStateGaugeAdmit(b *testing.B) {
	st := fsm.New()
	g := newStateGauge(1<<40, time.Hour, time.Now, func() *fsm.State { return st })
	g.nextAt.Store(math.MaxInt64)
	c := commands.MustNew(&logpb.AllocVirtualChannels{CollectionId: 1, Count: 1})
	b.ReportAllocs()
	for b.Loop() {
		if err := g.admit(c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateGaugeMeasure is one background measurement of a state of
// 100k segments (10k VChannels) and its estimate's error right after.
func BenchmarkStateGaugeMeasure(b *testing.B) {
	st, err := fsm.Synthetic(fsm.SyntheticShape{Segments: 100_000})
	if err != nil {
		b.Fatal(err)
	}
	g := newStateGauge(1<<40, time.Hour, time.Now, func() *fsm.State { return st })
	for b.Loop() {
		g.measure()
	}
	b.ReportMetric(float64(g.size().Bytes)/(1<<20), "MiB")
}
