package allocator

import (
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/testutil"
)

// gate blocks the fake leader's proposals of one command type until
// released, and tells the test when one arrives.
type gate struct {
	mu      sync.Mutex
	match   func(proto.Message) bool
	open    chan struct{}
	arrived chan struct{}
}

func newGate(l *controllertest.Leader, match func(proto.Message) bool) *gate {
	g := &gate{match: match, open: make(chan struct{}), arrived: make(chan struct{}, 16)}
	l.SetBeforePropose(func(body proto.Message) error {
		if !g.match(body) {
			return nil
		}
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		g.arrived <- struct{}{}
		<-open
		return nil
	})
	return g
}

// release lets every waiting and later proposal through.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// close blocks the proposals that come after it again.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = make(chan struct{})
}

func (g *gate) waitArrival(t *testing.T, l *controllertest.Leader) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-l.Deadline().Done():
		t.Fatal("no blocked proposal arrived")
	}
}

// returnsWhileBlocked runs f, which must finish although a reservation is
// held at the gate: a caller that waited for it would never return.
func returnsWhileBlocked(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(testutil.Timeout(10 * time.Second)):
		t.Fatalf("%s waited for the blocked reservation", what)
	}
}

func isReserve(b proto.Message) bool { _, ok := b.(*logpb.ReserveIDs); return ok }

// TestIDsPrefetchTheNextWindow: once less than half a batch is left, the
// next window is reserved in the background; callers keep being served
// while that reservation is stuck in raft, and move into the prefetched
// window without waiting for any reservation. Old code: the reservation
// ran under the allocator's lock when the window ran out, so the caller at
// the boundary (and every one behind it) waited for the commit.
func TestIDsPrefetchTheNextWindow(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 2)
	ids := NewIDs(l, 100)
	ctx := l.Deadline()
	g := newGate(l, isReserve)
	g.release()
	first, err := ids.Alloc(ctx, 40) // the first window: reserved by the caller
	if err != nil || first != 1 {
		t.Fatalf("first alloc: %d, %v", first, err)
	}
	g.close()
	var last uint64 = 40
	take := func(n uint32) {
		t.Helper()
		returnsWhileBlocked(t, "alloc", func() error {
			f, err := ids.Alloc(ctx, n)
			if err == nil && f != last+1 {
				t.Errorf("alloc of %d got %d, want %d (the next ID)", n, f, last+1)
			}
			last = f + uint64(n) - 1
			return err
		})
	}
	take(20) // 40 left < 50: the prefetch starts and blocks in raft
	g.waitArrival(t, l)
	take(30) // served from the current window while the prefetch is stuck
	take(5)
	g.release()
	testutil.Eventually(t, "the prefetched window is adopted", func() bool {
		ids.mu.Lock()
		defer ids.mu.Unlock()
		return ids.spare.left() == 100 && ids.prefetch == nil
	})
	g.close()
	// The current window has 5 left: this call moves into the prefetched
	// one (IDs 101..) although every reservation blocks again.
	f, err := ids.Alloc(ctx, 10)
	if err != nil || f != 101 {
		t.Fatalf("alloc past the window: %d, %v; want 101 from the prefetched window", f, err)
	}
	last = 110
	take(30) // the new prefetch is stuck again; still served
	g.waitArrival(t, l)
	g.release()
	if got := len(controllertest.AppliedOf[*logpb.ReserveIDs](l)); got > 3 {
		t.Fatalf("%d reservations for 3 windows", got)
	}
}

// TestIDsCallerWaitsForThePrefetchNotASecondReservation: a caller that
// runs out while the next window is being reserved waits for that one
// reservation (no second ReserveIDs) and is served from it.
func TestIDsCallerWaitsForThePrefetchNotASecondReservation(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 2)
	ids := NewIDs(l, 100)
	ctx := l.Deadline()
	if _, err := ids.Alloc(ctx, 60); err != nil { // 40 left: prefetch starts
		t.Fatal(err)
	}
	testutil.Eventually(t, "prefetch done", func() bool {
		ids.mu.Lock()
		defer ids.mu.Unlock()
		return ids.prefetch == nil && ids.spare.left() == 100
	})
	// Use up the spare too, then block the next prefetch.
	g := newGate(l, isReserve)
	if _, err := ids.Alloc(ctx, 90); err != nil { // into the spare (101..190), 10 left: prefetch blocks
		t.Fatal(err)
	}
	g.waitArrival(t, l)
	done := make(chan uint64, 1)
	go func() {
		f, err := ids.Alloc(ctx, 20) // more than is left: must wait for the prefetch
		if err != nil {
			t.Error(err)
		}
		done <- f
	}()
	// The caller's lock-free take did not fit and used the window up.
	testutil.Eventually(t, "the caller waits", func() bool {
		ids.mu.Lock()
		defer ids.mu.Unlock()
		return ids.cur.Load().left() == 0 && ids.prefetch != nil
	})
	if n := len(g.arrived); n != 0 {
		t.Fatalf("%d more reservations proposed while the prefetch ran; want none", n)
	}
	g.release()
	select {
	case f := <-done:
		if f != 201 {
			t.Fatalf("got %d, want 201 from the prefetched window", f)
		}
	case <-ctx.Done():
		t.Fatal("the caller never got its IDs")
	}
	// No count of the reservations after this point: the wait doubled the
	// reservation size, so the next prefetch may start at once.
}

// TestIDsPrefetchOfAnOldTermIsDropped: a background reservation that ends
// after the leader moved to a new term is not used in the new term.
func TestIDsPrefetchOfAnOldTermIsDropped(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 2)
	ids := NewIDs(l, 100)
	ctx := l.Deadline()
	g := newGate(l, isReserve)
	g.release()
	if _, err := ids.Alloc(ctx, 60); err != nil {
		t.Fatal(err)
	}
	g.close()
	if _, err := ids.Alloc(ctx, 1); err != nil {
		t.Fatal(err)
	}
	g.waitArrival(t, l) // the prefetch of term 2 is stuck
	l.Establish(t, 3)
	g.release()
	f, err := ids.Alloc(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f <= 61 {
		t.Fatalf("term 3 served %d, from a window of term 2", f)
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.term != 3 {
		t.Fatalf("allocator term %d", ids.term)
	}
}

// TestTSORefreshDoesNotBlockCallers: the leader routine's window extension
// is in raft while callers keep taking timestamps below the current limit.
// Old code: Refresh held the allocator's lock across the commit, so every
// caller waited for it every refresh.
func TestTSORefreshDoesNotBlockCallers(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.UnixMilli(1_000_000))
	l := controllertest.NewLeader(t, clk, 2)
	tso := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: clk})
	ctx := l.Deadline()
	if _, err := tso.Alloc(ctx, 1); err != nil { // window up to 1,003,000
		t.Fatal(err)
	}
	clk.Advance(2500 * time.Millisecond) // 0.5 s left < RefreshBefore 1 s
	g := newGate(l, func(b proto.Message) bool { _, ok := b.(*logpb.ExtendTSOWindow); return ok })
	refreshed := make(chan error, 1)
	go func() { refreshed <- tso.Refresh(ctx, 2) }()
	g.waitArrival(t, l)
	var last uint64
	for i := 0; i < 3; i++ {
		returnsWhileBlocked(t, "alloc during a refresh", func() error {
			ts, err := tso.Alloc(ctx, 100)
			if err == nil && ts <= last {
				t.Errorf("timestamp %d not above %d", ts, last)
			}
			last = ts
			return err
		})
	}
	g.release()
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	if got := l.State().TSOLimitPhysicalMs(); got != 1_005_500 {
		t.Fatalf("committed limit %d, want now+window 1005500", got)
	}
	// Past the old limit: the extended window serves.
	clk.Advance(time.Second)
	ts, err := tso.Alloc(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if phys, _ := ParseTS(ts); phys != 1_003_500 {
		t.Fatalf("physical %d, want the clock 1003500", phys)
	}
}

// TestTSOCallerAtTheLimitWaitsForTheRefresh: a caller that reaches the
// limit while Refresh's extension is in raft waits for it (instead of
// proposing a lower limit that would be rejected) and is served from it.
func TestTSOCallerAtTheLimitWaitsForTheRefresh(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.UnixMilli(1_000_000))
	l := controllertest.NewLeader(t, clk, 2)
	tso := NewTSO(l, TSOConfig{Window: 3 * time.Second, Clock: clk})
	ctx := l.Deadline()
	if _, err := tso.Alloc(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2500 * time.Millisecond)
	g := newGate(l, func(b proto.Message) bool { _, ok := b.(*logpb.ExtendTSOWindow); return ok })
	refreshed := make(chan error, 1)
	go func() { refreshed <- tso.Refresh(ctx, 2) }()
	g.waitArrival(t, l)
	clk.Advance(time.Second) // now past the committed limit
	got := make(chan error, 1)
	go func() {
		_, err := tso.Alloc(ctx, 1)
		got <- err
	}()
	g.release()
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("caller at the limit: %v", err)
	}
	if n := len(controllertest.AppliedOf[*logpb.ExtendTSOWindow](l)); n > 3 {
		t.Fatalf("%d extensions", n)
	}
}

// TestIDsReservationGrowsWhenCallersWait: a caller that has to wait for a
// reservation while a window was in use doubles the size of the next
// reservations, up to maxWindowGrowth batches; the first window of a term
// does not count as waiting. Old code: every reservation took one batch,
// so at a high enough rate callers queued behind raft every batch.
func TestIDsReservationGrowsWhenCallersWait(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 2)
	ids := NewIDs(l, 100)
	ctx := l.Deadline()
	sizes := func() []uint64 {
		var out []uint64
		for _, r := range controllertest.AppliedOf[*logpb.ReserveIDs](l) {
			out = append(out, r.Count)
		}
		return out
	}
	settled := func() {
		testutil.Eventually(t, "no reservation in flight", func() bool {
			ids.mu.Lock()
			defer ids.mu.Unlock()
			return ids.prefetch == nil
		})
	}
	if _, err := ids.Alloc(ctx, 1); err != nil { // the term's first window
		t.Fatal(err)
	}
	if got := sizes(); len(got) != 1 || got[0] != 100 {
		t.Fatalf("first window: reservations %v, want [100]", got)
	}
	// Take more than a batch at once, past both windows: the caller
	// reserves synchronously with a window in use, so the size doubles.
	for want := uint64(200); want <= 100*maxWindowGrowth; want *= 2 {
		settled()
		ids.mu.Lock()
		left := ids.cur.Load().left() + ids.spare.left()
		ids.mu.Unlock()
		if _, err := ids.Alloc(ctx, uint32(left)+1); err != nil {
			t.Fatal(err)
		}
		got := sizes()
		if n := got[len(got)-1]; n < want {
			t.Fatalf("after waiting with a window in use: last reservation %d, want >= %d (all: %v)", n, want, got)
		}
	}
	settled()
	ids.mu.Lock()
	ids.want.Store(ids.batch * maxWindowGrowth)
	ids.growLocked()
	capped := ids.want.Load()
	ids.mu.Unlock()
	if capped != 100*maxWindowGrowth {
		t.Fatalf("reservation size grew past its cap: %d", capped)
	}
}
