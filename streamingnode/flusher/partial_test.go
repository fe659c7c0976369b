package flusher

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// waitFor polls cond (the flusher runs on its own goroutines).
func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// seg reads the fake coordinator's record of segment id.
func (r *rig) seg(id int64) fakeSeg {
	r.coord.mu.Lock()
	defer r.coord.mu.Unlock()
	return *r.coord.segs[id]
}

// A growing segment whose buffer reaches SaveBytes is saved without being
// flushed: it keeps growing, its DML position moves, and the VChannel's
// checkpoint moves past the saved rows (without partial saves it stays at
// the segment's first row until the flush). The flush then writes only
// the remainder, and every row is persisted once.
func TestPartialSaveBySizeAdvancesCheckpoint(t *testing.T) {
	r := newRigWith(t, "", func(c *Config) { c.SaveBytes = 5 * rowBytes })
	v := testP + "_1v0"
	r.coord.segment(10, 1, v)
	r.insert(1, 10, 1, 2, 3) // offset 0: below the threshold
	r.insert(1, 10, 4, 5, 6) // offset 1: 6 rows buffered, due
	r.waitFor("a partial save of segment 10", func() bool { return len(r.seg(10).logs) == 1 })
	if s := r.seg(10); s.state != "Growing" || s.rows != 6 || s.dml == nil || s.dml.Offset != 1 || s.start == nil || s.start.Offset != 0 {
		t.Fatalf("segment after the partial save: %+v (dml %v, start %v)", s, s.dml, s.start)
	}
	r.waitFor("the checkpoint past the saved rows", func() bool {
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		cp := r.coord.cps[v]
		return cp != nil && cp.Offset >= 2
	})
	r.insert(1, 10, 7, 8)
	r.coord.flush(r.term, 10)
	r.waitFlushed(10)
	s := r.seg(10)
	if s.state != "Flushed" || len(s.logs) != 2 || s.rows != 8 {
		t.Fatalf("flushed segment %+v", s)
	}
	got := r.persisted()
	for pk := int64(1); pk <= 8; pk++ {
		if got[pk] != 1 {
			t.Fatalf("pk %d persisted %d times (%v)", pk, got[pk], got)
		}
	}
}

// By age: rows buffered for SaveInterval are saved; younger ones are not.
func TestPartialSaveByAge(t *testing.T) {
	clock := clockwork.NewFakeClock()
	r := newRigWith(t, "", func(c *Config) { c.SaveInterval = time.Minute; c.Clock = clock })
	r.coord.segment(10, 1, testP+"_1v0")
	r.insert(1, 10, 1)
	r.waitFor("the row buffered", func() bool { return r.m.metrics != nil && bufferedRows(r.m) == 1 })
	clock.Advance(59 * time.Second)
	// Two more time tick reports: the flusher's loop has passed its
	// partial-save check (which follows the report) at least once since.
	tick := func() uint64 {
		r.coord.mu.Lock()
		defer r.coord.mu.Unlock()
		return r.coord.ticks[testP+"_1v0"]
	}
	t0 := tick()
	r.waitFor("two time tick reports", func() bool { return tick() >= t0+2 })
	if n := len(r.seg(10).logs); n != 0 {
		t.Fatalf("saved after 59s: %d binlogs", n)
	}
	clock.Advance(time.Second)
	r.waitFor("the partial save", func() bool { return len(r.seg(10).logs) == 1 })
	if s := r.seg(10); s.state != "Growing" {
		t.Fatalf("segment %+v", s)
	}
}

func bufferedRows(m *Manager) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, c := range m.channels {
		n += c.bufferedRows.Load()
	}
	return n
}

// Takeovers with partial saves in between: still exactly once, and the
// segments flushed hold more than one binlog (some rows were saved before
// the flush).
func TestTakeoverExactlyOnceWithPartialSaves(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := takeoverExactlyOnce(t, seed, "", func(c *Config) { c.SaveBytes = 4 * rowBytes })
			multi := 0
			r.coord.mu.Lock()
			for _, s := range r.coord.segs {
				if s.state == "Flushed" && len(s.logs) > 1 {
					multi++
				}
			}
			r.coord.mu.Unlock()
			if multi == 0 {
				t.Fatal("no flushed segment had a partial save before its flush")
			}
		})
	}
}

// A partial save that coordd records only after the flusher gave up on it
// (error answer) and recovered without it: the flusher's next save of the
// same rows overlaps the recorded DML position and is answered stale, the
// flusher recovers again, and no row is persisted twice.
func TestLateRecordedPartialSaveExactlyOnce(t *testing.T) {
	r := newRigWith(t, "", func(c *Config) { c.SaveBytes = 3 * rowBytes })
	r.coord.mu.Lock()
	r.coord.deferSaves = 1
	r.coord.mu.Unlock()
	v := testP + "_1v0"
	r.coord.segment(10, 1, v)
	r.insert(1, 10, 1, 2, 3)
	r.waitFor("the late save recorded", func() bool { return len(r.seg(10).logs) >= 1 })
	r.insert(1, 10, 4, 5, 6)
	r.waitFor("the second rows saved", func() bool { return r.seg(10).rows == 6 })
	r.insert(1, 10, 7)
	r.coord.flush(r.term, 10)
	r.waitFlushed(10)
	got := r.persisted()
	for pk := int64(1); pk <= 7; pk++ {
		if got[pk] != 1 {
			t.Fatalf("pk %d persisted %d times (%v)", pk, got[pk], got)
		}
	}
	r.coord.mu.Lock()
	stale := r.coord.stale
	r.coord.mu.Unlock()
	if s := r.seg(10); s.rows != 7 || stale == 0 {
		t.Fatalf("segment %+v, %d stale answers (want the overlapping save refused)", s, stale)
	}
}
