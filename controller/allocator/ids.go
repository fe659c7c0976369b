package allocator

import (
	"context"
	"fmt"
	"sync"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// DefaultIDBatch is how many IDs one reservation takes when a call needs
// fewer.
const DefaultIDBatch = 10000

// IDs is the global ID allocator.
type IDs struct {
	leader Leader
	batch  uint64

	// unsafeNoReservation breaks the allocator on purpose (test-only):
	// IDs are handed out from the FSM's next ID without committing a
	// reservation, so a new leader repeats IDs. The Jepsen-style tests run
	// a build with it to prove their checkers catch the violation.
	unsafeNoReservation bool

	mu   sync.Mutex
	term uint64
	next uint64 // next unused ID of the reserved range
	end  uint64 // end (exclusive) of the reserved range
}

// NewIDs returns an ID allocator reserving batch IDs at a time (0 = default).
func NewIDs(leader Leader, batch uint64) *IDs {
	if batch == 0 {
		batch = DefaultIDBatch
	}
	return &IDs{leader: leader, batch: batch}
}

// UnsafeSkipReservation turns on the deliberate bug described on the
// field. Never use it outside tests of the test harness.
func (a *IDs) UnsafeSkipReservation() { a.unsafeNoReservation = true }

// Alloc returns the first of count consecutive IDs.
func (a *IDs) Alloc(ctx context.Context, count uint32) (uint64, error) {
	if count == 0 || count > commands.MaxAllocCount {
		return 0, fmt.Errorf("id count must be in 1..%d, got %d", commands.MaxAllocCount, count)
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
	if a.term != term {
		// A range reserved in an earlier term may have been partly served
		// by this node already; never reuse it.
		a.term, a.next, a.end = term, 0, 0
	}
	if a.unsafeNoReservation && a.end == 0 {
		// The deliberate bug: a window nobody committed.
		next := a.leader.State().NextID()
		a.next, a.end = next, next+1<<40
	}
	if a.end-a.next < count {
		res, err := commands.Propose(ctx, a.leader, &logpb.ReserveIDs{Count: max(count, a.batch)}, "")
		if err != nil {
			return 0, fmt.Errorf("reserve ids: %w", err)
		}
		if res.Rejection != nil {
			return 0, fmt.Errorf("reserve ids: %s", res.Rejection.Message)
		}
		r := res.GetIdRange()
		a.next, a.end = r.First, r.First+r.Count
	}
	first := a.next
	a.next += count
	return first, nil
}
