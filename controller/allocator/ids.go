package allocator

import (
	"context"
	"fmt"
	"sync"
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

// idWindow is a committed range of IDs, [next, end).
type idWindow struct{ next, end uint64 }

func (w idWindow) left() uint64 { return w.end - w.next }

// IDs is the global ID allocator. It serves from a committed window and,
// once less than half a reservation is left in it, reserves the next window in
// the background, so callers move into a window that is already committed
// instead of all waiting for a reservation every batch (alloc-id-100 in
// bench/RESULTS.md). Invariant: every ID in spare is above every ID in cur,
// and every ID served comes from cur, so IDs increase in the order calls
// take them.
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

	mu    sync.Mutex
	term  uint64
	cur   idWindow // the window IDs are served from
	spare idWindow // the next committed window (empty: none)
	want  uint64   // IDs the next reservation takes: batch..batch*maxWindowGrowth
	// prefetch is closed when the running background reservation ends
	// (nil: none running for this term).
	prefetch chan struct{}
}

// NewIDs returns an ID allocator reserving batch IDs at a time (0 = default).
func NewIDs(leader Leader, batch uint64) *IDs {
	if batch == 0 {
		batch = DefaultIDBatch
	}
	return &IDs{leader: leader, batch: batch, want: batch}
}

// maxWindowGrowth bounds how many batches one adaptive reservation takes.
const maxWindowGrowth = 64

// growLocked doubles the reservation size after a caller waited for raft
// with a window already in use (the first window of a term does not count).
func (a *IDs) growLocked() {
	if a.cur.end != 0 {
		a.want = min(2*a.want, a.batch*maxWindowGrowth, commands.MaxReserveIDs)
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
	// The range is reserved for this term's decisions only.
	first, err := a.take(commands.WithDecisionTerm(ctx, term), term, uint64(count))
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

func (a *IDs) take(ctx context.Context, term, count uint64) (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if a.term != term {
			// A range reserved in an earlier term may have been partly
			// served by this node already; never reuse it. A background
			// reservation of that term is left to finish and be dropped.
			a.term, a.cur, a.spare, a.prefetch = term, idWindow{}, idWindow{}, nil
		}
		if a.unsafeNoReservation && a.cur.end == 0 {
			// The deliberate bug: a window nobody committed.
			next := a.leader.State().NextID()
			a.cur = idWindow{next, next + 1<<40}
		}
		if a.cur.left() < count && a.spare.left() >= count {
			a.cur, a.spare = a.spare, idWindow{}
		}
		if a.cur.left() >= count {
			first := a.cur.next
			a.cur.next += count
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
		res, err := commands.CommitNew(ctx, a.leader, &logpb.ReserveIDs{Count: max(count, a.want)}, "")
		if err != nil {
			return 0, fmt.Errorf("reserve ids: %w", err)
		}
		if a.term != term {
			continue
		}
		r := res.GetIdRange()
		a.cur, a.spare = idWindow{r.First, r.First + r.Count}, idWindow{}
	}
}

// maybePrefetchLocked starts reserving the next window in the background
// once less than half a reservation is left and none is held or on its way.
func (a *IDs) maybePrefetchLocked(term uint64) {
	if a.unsafeNoReservation || a.prefetch != nil || a.spare.left() > 0 || a.cur.left() >= a.want/2 {
		return
	}
	want := a.want
	ch := make(chan struct{})
	a.prefetch = ch
	go func() {
		defer close(ch)
		ctx, cancel := context.WithTimeout(commands.WithDecisionTerm(context.Background(), term), prefetchTimeout)
		res, err := commands.CommitNew(ctx, a.leader, &logpb.ReserveIDs{Count: want}, "")
		cancel()
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.prefetch == ch {
			a.prefetch = nil
		}
		if err != nil || a.term != term {
			return // a caller that needs a window reserves it itself
		}
		// Keep it only above everything held: a window reserved by a
		// caller meanwhile may have landed after this one.
		if r := res.GetIdRange(); r != nil && a.spare.left() == 0 && r.First >= a.cur.end {
			a.spare = idWindow{r.First, r.First + r.Count}
		}
	}()
}
