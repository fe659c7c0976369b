package flusher

import (
	"testing"
	"time"

	"github.com/coordd/coordd/testutil"
)

// Idle means idle: once a VChannel's checkpoint is reported, a flusher with
// no new records keeps reporting time ticks (leader memory) but sends no
// checkpoint (a raft commit) until the checkpoint's WAL position moves or
// coordd says a flush waits on it (checkpoint_wanted).
func TestIdleFlusherReportsCheckpointsOnlyWhenTheyMove(t *testing.T) {
	r := newRigWith(t, "", func(c *Config) { c.IdleCheckpointInterval = time.Hour })
	v1, v2 := testP+"_1v0", testP+"_2v0"
	count := func() (cpCalls, tickCalls int, ts1 uint64) {
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		if cp := r.coord.cps[v1]; cp != nil {
			ts1 = cp.Timestamp
		}
		return r.coord.cpCalls, r.coord.tickCalls, ts1
	}
	testutil.Eventually(t, "first checkpoints of both vchannels", func() bool {
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		return r.coord.cps[v1] != nil && r.coord.cps[v2] != nil
	})
	cp0, ticks0, ts0 := count()
	testutil.Eventually(t, "50 more tick reports", func() bool {
		_, ticks, _ := count()
		return ticks >= ticks0+50
	})
	if cp, _, _ := count(); cp != cp0 {
		t.Fatalf("an idle flusher sent %d checkpoint updates over 50 tick reports; want 0", cp-cp0)
	}

	// A flush waits on v1: its checkpoint moves in time only.
	r.coord.mu.Lock()
	r.coord.wanted = map[string]bool{v1: true}
	r.coord.mu.Unlock()
	testutil.Eventually(t, "a wanted checkpoint is reported", func() bool {
		_, _, ts := count()
		return ts > ts0
	})
	r.coord.mu.Lock()
	r.coord.wanted = nil
	r.coord.mu.Unlock()

	// A new record moves the position: reported without being wanted.
	r.coord.mu.Lock()
	off2 := r.coord.cps[v2].Offset
	r.coord.mu.Unlock()
	r.coord.segment(10, 2, v2)
	r.insert(2, 10, 1)
	r.coord.flush(r.term, 10)
	r.waitFlushed(10)
	testutil.Eventually(t, "v2's checkpoint moves past the new record", func() bool {
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		return r.coord.cps[v2].Offset > off2
	})
}

// The idle interval bounds an idle VChannel's checkpoint lag.
func TestIdleCheckpointInterval(t *testing.T) {
	r := newRigWith(t, "", func(c *Config) { c.IdleCheckpointInterval = 20 * time.Millisecond })
	v1 := testP + "_1v0"
	var first uint64
	testutil.Eventually(t, "first checkpoint", func() bool {
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		if cp := r.coord.cps[v1]; cp != nil {
			first = cp.Timestamp
			return true
		}
		return false
	})
	testutil.Eventually(t, "the idle checkpoint moves after the interval", func() bool {
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		return r.coord.cps[v1].Timestamp > first
	})
}

// An idle flusher takes no fresh time tick (a TSO allocation, and on an
// idle coordd leader a lease renewal in the log) per report; it takes one
// when coordd says a sealed segment waits for it (tick_wanted).
func TestIdleFlusherTakesFreshTicksOnlyWhenWanted(t *testing.T) {
	r := newRigWith(t, "", func(c *Config) { c.IdleCheckpointInterval = time.Hour })
	v1 := testP + "_1v0"
	counts := func() (hostTicks, reports int) {
		r.host.mu.Lock()
		hostTicks = r.host.ticks
		r.host.mu.Unlock()
		r.coord.mu.Lock()
		reports = r.coord.tickCalls
		r.coord.mu.Unlock()
		return
	}
	testutil.Eventually(t, "first checkpoints", func() bool {
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		return r.coord.cps[v1] != nil && r.coord.cps[testP+"_2v0"] != nil
	})
	h0, rep0 := counts()
	testutil.Eventually(t, "50 more tick reports", func() bool {
		_, rep := counts()
		return rep >= rep0+50
	})
	if h, _ := counts(); h != h0 {
		t.Fatalf("an idle flusher took %d fresh ticks over 50 reports; want 0", h-h0)
	}
	r.coord.mu.Lock()
	r.coord.tickWant = map[string]bool{v1: true}
	tick0 := r.coord.ticks[v1]
	r.coord.mu.Unlock()
	testutil.Eventually(t, "a wanted fresh tick is taken and reported", func() bool {
		h, _ := counts()
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		return h > h0 && r.coord.ticks[v1] > tick0
	})
}
