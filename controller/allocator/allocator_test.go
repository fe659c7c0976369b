package allocator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/testutil"
	"github.com/coordd/coordd/vocab"
)

func TestTSOStartsAboveCommittedWindowAndExtends(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.UnixMilli(1_000_000))
	l := controllertest.NewLeader(t, clk, 2)
	tso := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: clk})
	ctx := context.Background()

	first, err := tso.Alloc(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if phys, _ := ParseTS(first); phys != 1_000_000 {
		t.Fatalf("first physical = %d, want the clock 1000000", phys)
	}
	if got := l.State().TSOLimitPhysicalMs(); got != 1_003_000 {
		t.Fatalf("committed limit = %d, want now+window 1003000", got)
	}
	// Within the window: no new proposal; past it: the limit is extended
	// before any value at or above it is handed out.
	n := len(l.Applied())
	if _, err := tso.Alloc(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if len(l.Applied()) != n {
		t.Fatalf("allocation inside the window proposed %d commands", len(l.Applied())-n)
	}
	clk.Advance(5 * time.Second)
	ts, err := tso.Alloc(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	phys, _ := ParseTS(ts)
	if limit := l.State().TSOLimitPhysicalMs(); phys >= limit {
		t.Fatalf("handed out physical %d at or above the committed limit %d", phys, limit)
	}

	// A new leader whose clock is behind still starts above everything the
	// old one could have handed out.
	l.Establish(t, 3)
	slow := clockwork.NewFakeClockAt(time.UnixMilli(900_000))
	tso2 := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: slow})
	ts2, err := tso2.Alloc(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ts2 <= ts {
		t.Fatalf("new leader's timestamp %d is not above the old leader's %d", ts2, ts)
	}
}

func TestTSOMonotonicUnderClockRegressionAndLogicalOverflow(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.UnixMilli(2_000_000))
	l := controllertest.NewLeader(t, clk, 2)
	// The clock steps back 8 s in all; a lead bound below that would make
	// callers wait for the clock (TestTSOLeadIsBounded), not this test's point.
	tso := NewTSO(l, TSOConfig{Clock: clk, MaxLead: time.Minute})
	ctx := context.Background()
	var last uint64
	for i := 0; i < 200; i++ {
		if i%50 == 25 {
			clk.Advance(-2 * time.Second) // the clock steps back
		}
		ts, err := tso.Alloc(ctx, 100_000) // overflows the 18-bit logical part often
		if err != nil {
			t.Fatal(err)
		}
		if ts <= last {
			t.Fatalf("alloc %d: %d not above previous %d", i, ts, last)
		}
		_, logical := ParseTS(ts)
		if logical+100_000 > maxLogical {
			t.Fatalf("range [%d,+100000) overflows the logical part", logical)
		}
		last = ts + 100_000 - 1
	}
}

func TestAllocatorsRefuseWithoutLeadership(t *testing.T) {
	ctx := context.Background()
	l := controllertest.NewLeader(t, controllertest.NewClock(), 2)
	tso, ids := NewTSO(l, TSOConfig{}), NewIDs(l, 0)
	l.SetVerifyError(errors.New("lost quorum"))
	if _, err := tso.Alloc(ctx, 1); err == nil {
		t.Fatal("TSO answered although the leadership check failed")
	}
	if _, err := ids.Alloc(ctx, 1); err == nil {
		t.Fatal("IDs answered although the leadership check failed")
	}
	l.SetVerifyError(nil)
	l.SetEstablished(0)
	if _, err := tso.Alloc(ctx, 1); !errors.Is(err, leadership.ErrNotLeader) {
		t.Fatalf("TSO on a non-leader: %v, want ErrNotLeader", err)
	}
	for _, n := range []uint32{0, maxLogical} {
		if _, err := tso.Alloc(ctx, n); err == nil {
			t.Fatalf("TSO accepted count %d", n)
		}
	}
	for _, n := range []uint32{0, vocab.MaxAllocCount + 1} {
		if _, err := ids.Alloc(ctx, n); err == nil {
			t.Fatalf("IDs accepted count %d", n)
		}
	}
}

func TestIDsNeverReusedAcrossTerms(t *testing.T) {
	ctx := context.Background()
	l := controllertest.NewLeader(t, controllertest.NewClock(), 2)
	ids := NewIDs(l, 100)
	seen := map[uint64]bool{}
	var last uint64
	take := func(a *IDs, n uint32) {
		first, err := a.Alloc(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		for id := first; id < first+uint64(n); id++ {
			if seen[id] || id <= last {
				t.Fatalf("id %d repeated or not increasing (last %d)", id, last)
			}
			seen[id] = true
		}
		last = first + uint64(n) - 1
	}
	take(ids, 30)
	take(ids, 80) // crosses the reserved batch: a new reservation
	// 20 left of the second batch: the third is reserved in the background.
	testutil.Eventually(t, "the next window is prefetched", func() bool {
		return l.State().NextID() == 1+100+100+100
	})
	// Same allocator, new term: the rest of the old ranges is abandoned.
	l.Establish(t, 3)
	take(ids, 1)
	if last != 301 {
		t.Fatalf("first id of the new term = %d, want 301", last)
	}
	take(ids, 500) // larger than the batch
}
