package allocator

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/controller/controllertest"
)

// testDeadline bounds a test that could otherwise hang on a fake clock.
func testDeadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestTSONeverServesAtCommittedLimit: with the clock exactly on the
// committed limit, the window is extended before that millisecond is
// handed out (a new leader may start at the limit).
func TestTSONeverServesAtCommittedLimit(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.UnixMilli(1_000_000))
	l := controllertest.NewLeader(t, clk, 2)
	tso := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: clk})
	ctx := testDeadline(t)
	if _, err := tso.Alloc(ctx, 1); err != nil {
		t.Fatal(err)
	}
	limit := l.State().TSOLimitPhysicalMs()
	clk.Advance(time.Duration(limit-1_000_000) * time.Millisecond) // physical == committed limit
	ts, err := tso.Alloc(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if phys, _ := ParseTS(ts); phys >= l.State().TSOLimitPhysicalMs() {
		t.Fatalf("handed out physical %d at or above the committed limit %d (was %d)", phys, l.State().TSOLimitPhysicalMs(), limit)
	}
	// A new leader starts above whatever the old one could hand out.
	l.Establish(t, 3)
	ts2, err := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: clk}).Alloc(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ts2 <= ts {
		t.Fatalf("new leader's first timestamp %d is not above the old leader's %d", ts2, ts)
	}
}

// TestTSOLeadIsBounded: using up the logical space pushes the physical part
// ahead of the clock only up to MaxLead; then a caller waits for the clock.
func TestTSOLeadIsBounded(t *testing.T) {
	const lead = 200 * time.Millisecond
	start := time.UnixMilli(5_000_000)
	clk := clockwork.NewFakeClockAt(start)
	l := controllertest.NewLeader(t, clk, 2)
	tso := NewTSO(l, TSOConfig{Window: 100 * time.Millisecond, MaxLead: lead, Clock: clk})
	ctx := testDeadline(t)
	for i := 0; ; i++ {
		ts, err := tso.Alloc(ctx, maxLogical-1) // one millisecond each
		if err != nil {
			t.Fatal(err)
		}
		phys, _ := ParseTS(ts)
		if ahead := time.Duration(phys-start.UnixMilli()) * time.Millisecond; ahead > lead {
			t.Fatalf("alloc %d: physical %v ahead of the clock, more than MaxLead %v", i, ahead, lead)
		} else if ahead == lead {
			break
		}
		if i > 1000 {
			t.Fatal("the lead never reached MaxLead")
		}
	}
	if skew, ok := tso.Skew(); !ok || skew != lead {
		t.Fatalf("Skew = %v, %v; want %v", skew, ok, lead)
	}
	got := make(chan uint64, 1)
	go func() {
		ts, err := tso.Alloc(ctx, maxLogical-1)
		if err != nil {
			t.Error(err)
		}
		got <- ts
	}()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the allocation past MaxLead did not wait for the clock: %v", err)
	}
	select {
	case ts := <-got:
		t.Fatalf("allocation past MaxLead returned %d without waiting", ts)
	default:
	}
	clk.Advance(time.Millisecond)
	select {
	case ts := <-got:
		if phys, _ := ParseTS(ts); phys != start.UnixMilli()+lead.Milliseconds()+1 {
			t.Fatalf("after the clock moved 1 ms: physical %d, want %d", phys, start.UnixMilli()+lead.Milliseconds()+1)
		}
	case <-ctx.Done():
		t.Fatal("allocation still waiting after the clock moved")
	}
}

// TestTSOFailoversDoNotRatchet: many quick leader changes leave the oracle
// within about one window of the clock (each used to add a whole window).
func TestTSOFailoversDoNotRatchet(t *testing.T) {
	const window = 3 * time.Second
	clk := clockwork.NewFakeClockAt(time.UnixMilli(7_000_000))
	l := controllertest.NewLeader(t, clk, 2)
	ctx := testDeadline(t)
	var last uint64
	var tso *TSO
	for term := uint64(2); term < 102; term++ {
		if term > 2 {
			l.Establish(t, term)
		}
		tso = NewTSO(l, TSOConfig{Window: window, Clock: clk})
		ts, err := tso.Alloc(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if ts <= last {
			t.Fatalf("term %d: timestamp %d not above %d", term, ts, last)
		}
		last = ts
		clk.Advance(10 * time.Millisecond)
	}
	skew, ok := tso.Skew()
	if !ok || skew > window+200*time.Millisecond {
		t.Fatalf("after 100 leader changes the oracle is %v ahead of the clock (ok %v); want at most about one window (%v)", skew, ok, window)
	}
}

// TestTSORefreshAheadOfTheClock: with the oracle running more than a window
// ahead of the clock (a burst used up milliseconds, within MaxLead), the
// committed limit can already be above what Refresh would ask for; Refresh
// then proposes nothing, rather than a limit Apply refuses (which closed
// the window and failed the callers waiting on the refresh).
func TestTSORefreshAheadOfTheClock(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.UnixMilli(1_000_000))
	l := controllertest.NewLeader(t, clk, 2)
	tso := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: clk})
	ctx := testDeadline(t)
	// Each call uses up a millisecond: 3,500 of them put the oracle 3.5 s
	// (more than the window, less than MaxLead) ahead of the clock, and
	// the callers extended the limit to just past it.
	for range 3500 {
		if _, err := tso.Alloc(ctx, maxLogical-1); err != nil {
			t.Fatal(err)
		}
	}
	if lead, _ := tso.Skew(); lead <= 3*time.Second {
		t.Fatalf("lead %v; the test wants more than the window", lead)
	}
	if err := tso.Refresh(ctx, 2); err != nil {
		t.Fatalf("Refresh ahead of the clock: %v", err)
	}
	if _, ok := tso.Skew(); !ok {
		t.Fatal("Refresh closed the window")
	}
}
