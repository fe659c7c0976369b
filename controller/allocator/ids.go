package allocator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// DefaultIDBatch is how many IDs one reservation takes when a call needs
// fewer.
const DefaultIDBatch = 10000

// prefetchTimeout bounds a background reservation (it has no caller whose
// context could end it).
const prefetchTimeout = 10 * time.Second

// idRange is a committed range of IDs, [next, end).
type idRange struct{ next, end uint64 }

func (r idRange) left() uint64 { return r.end - r.next }

// idWindow is the committed range IDs are served from, for one term.
// Callers take from it with an atomic add, without the allocator's lock
// (W1's alloc-id variants in bench/RESULTS.md: 64 callers at once); next
// may run past end after a take that did not fit, and the window is then
// used up.
type idWindow struct {
	term uint64
	end  uint64
	next atomic.Uint64
	// prefetchAsked is set by the first lock-free taker that finds less
	// than half a reservation left: it (alone) goes for the lock to start
	// the next reservation. A failed reservation clears it.
	prefetchAsked atomic.Bool
}

func newIDWindow(term uint64, r idRange) *idWindow {
	w := &idWindow{term: term, end: r.end}
	w.next.Store(r.next)
	return w
}

// left is how many IDs the window still holds (0 for nil).
func (w *idWindow) left() uint64 {
	if w == nil {
		return 0
	}
	if n := w.next.Load(); n < w.end {
		return w.end - n
	}
	return 0
}

// tryTake takes count consecutive IDs, or reports false (the window is
// then used up). Each ID is taken at most once: the add hands every
// caller its own range of the counter.
func (w *idWindow) tryTake(count uint64) (uint64, bool) {
	first := w.next.Add(count) - count
	return first, first < w.end && count <= w.end-first
}

// IDs is the global ID allocator. It serves from a committed window and,
// once less than half a reservation is left in it, reserves the next window in
// the background, so callers move into a window that is already committed
// instead of all waiting for a reservation every batch (alloc-id-100 in
// bench/RESULTS.md). Invariant: every ID in spare is above every ID in cur,
// and every ID served comes from cur, so IDs increase in the order calls
// take them. cur is replaced only under mu, by a window above it.
//
// The reservation size adapts to demand: each time a caller has to wait
// for a reservation although a window was in use (the prefetch was too
// late for the rate IDs are taken at), the size doubles, up to
// maxWindowGrowth batches. A window is the unit of loss at a failover (the
// new leader never reuses it), and 64-bit IDs make that loss free, while
// a caller waiting for raft is what made alloc-id-100 slow.
type IDs struct {
	leader Leader
	batch  uint64

	// unsafeNoReservation breaks the allocator on purpose (test-only):
	// IDs are handed out from the FSM's next ID without committing a
	// reservation, so a new leader repeats IDs. The Jepsen-style tests run
	// a build with it to prove their checkers catch the violation.
	unsafeNoReservation bool

	// cur is the window IDs are served from (nil: none); read without mu,
	// replaced under it.
	cur atomic.Pointer[idWindow]
	// want is how many IDs the next reservation takes:
	// batch..batch*maxWindowGrowth; written under mu.
	want atomic.Uint64

	mu    sync.Mutex
	term  uint64
	spare idRange // the next committed window (empty: none)
	// prefetch is closed when the running background reservation ends
	// (nil: none running for this term).
	prefetch chan struct{}
}

// NewIDs returns an ID allocator reserving batch IDs at a time (0 = default).
func NewIDs(leader Leader, batch uint64) *IDs {
	if batch == 0 {
		batch = DefaultIDBatch
	}
	a := &IDs{leader: leader, batch: batch}
	a.want.Store(batch)
	return a
}

// maxWindowGrowth bounds how many batches one adaptive reservation takes.
const maxWindowGrowth = 64

// growLocked doubles the reservation size after a caller waited for raft
// with a window already in use (the first window of a term does not count).
func (a *IDs) growLocked() {
	if a.cur.Load() != nil {
		a.want.Store(min(2*a.want.Load(), a.batch*maxWindowGrowth, commands.MaxReserveIDs))
	}
}

// UnsafeSkipReservation turns on the deliberate bug described on the
// field. Never use it outside tests of the test harness.
func (a *IDs) UnsafeSkipReservation() { a.unsafeNoReservation = true }

// Alloc returns the first of count consecutive IDs.
func (a *IDs) Alloc(ctx context.Context, count uint32) (uint64, error) {
	if count == 0 || count > vocab.MaxAllocCount {
		return 0, fmt.Errorf("id count must be in 1..%d, got %d", vocab.MaxAllocCount, count)
	}
	term := a.leader.EstablishedTerm()
	if term == 0 {
		return 0, errNotLeader
	}
	first, err := a.take(ctx, term, uint64(count))
	if err != nil {
		return 0, err
	}
	if err := a.leader.VerifyLeader(ctx); err != nil {
		return 0, err
	}
	if a.leader.EstablishedTerm() != term {
		return 0, errNotLeader
	}
	return first, nil
}

// take hands out count IDs of term's window: without the lock while the
// window holds them, else through takeSlow.
func (a *IDs) take(ctx context.Context, term, count uint64) (uint64, error) {
	if w := a.cur.Load(); w != nil && w.term == term {
		if first, ok := w.tryTake(count); ok {
			if w.end-(first+count) < a.want.Load()/2 && w.prefetchAsked.CompareAndSwap(false, true) {
				a.mu.Lock()
				a.maybePrefetchLocked(term)
				a.mu.Unlock()
			}
			return first, nil
		}
	}
	return a.takeSlow(ctx, term, count)
}

// takeSlow serves a call the current window cannot: it moves to the spare
// window, waits for the one on its way, or reserves one.
func (a *IDs) takeSlow(ctx context.Context, term, count uint64) (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Reservations are made for this term's decisions only.
	decider := commands.Fenced(a.leader, term)
	for {
		if a.term != term {
			// A range reserved in an earlier term may have been partly
			// served by this node already; never reuse it. A background
			// reservation of that term is left to finish and be dropped.
			a.term, a.spare, a.prefetch = term, idRange{}, nil
			a.cur.Store(nil)
		}
		if a.unsafeNoReservation && a.cur.Load() == nil {
			// The deliberate bug: a window nobody committed.
			next := a.leader.State().NextID()
			a.cur.Store(newIDWindow(term, idRange{next, next + 1<<40}))
		}
		if a.cur.Load().left() < count && a.spare.left() >= count {
			a.cur.Store(newIDWindow(term, a.spare))
			a.spare = idRange{}
		}
		if cur := a.cur.Load(); cur.left() >= count {
			first, ok := cur.tryTake(count)
			if !ok {
				continue // lock-free takers used it up meanwhile
			}
			a.maybePrefetchLocked(term)
			return first, nil
		}
		if a.prefetch != nil && count <= a.batch {
			// The next window is on its way and will cover this call.
			a.growLocked()
			ch := a.prefetch
			a.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				a.mu.Lock()
				return 0, fmt.Errorf("reserve ids: %w", ctx.Err())
			}
			a.mu.Lock()
			continue
		}
		// Nothing committed covers the call: reserve now, holding the lock
		// (every caller needs this window). It lands after any window held,
		// which are dropped so IDs keep increasing.
		a.growLocked()
		res, err := commands.CommitNew(ctx, decider, &logpb.ReserveIDs{Count: max(count, a.want.Load())}, "")
		if err != nil {
			return 0, fmt.Errorf("reserve ids: %w", err)
		}
		if a.term != term {
			continue
		}
		r := res.GetIdRange()
		a.cur.Store(newIDWindow(term, idRange{r.First, r.First + r.Count}))
		a.spare = idRange{}
	}
}

// maybePrefetchLocked starts reserving the next window in the background
// once less than half a reservation is left and none is held or on its way.
func (a *IDs) maybePrefetchLocked(term uint64) {
	if a.unsafeNoReservation || a.prefetch != nil || a.spare.left() > 0 || a.cur.Load().left() >= a.want.Load()/2 {
		return
	}
	want := a.want.Load()
	ch := make(chan struct{})
	a.prefetch = ch
	go func() {
		defer close(ch)
		ctx, cancel := context.WithTimeout(context.Background(), prefetchTimeout)
		res, err := commands.CommitNew(ctx, commands.Fenced(a.leader, term), &logpb.ReserveIDs{Count: want}, "")
		cancel()
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.prefetch == ch {
			a.prefetch = nil
		}
		if a.term != term {
			return
		}
		cur := a.cur.Load()
		if err != nil {
			// A caller that needs a window reserves it itself; the next
			// lock-free taker past half the window asks again.
			if cur != nil {
				cur.prefetchAsked.Store(false)
			}
			return
		}
		// Keep it only above everything held: a window reserved by a
		// caller meanwhile may have landed after this one.
		if r := res.GetIdRange(); r != nil && a.spare.left() == 0 && (cur == nil || r.First >= cur.end) {
			a.spare = idRange{r.First, r.First + r.Count}
		}
	}()
}
