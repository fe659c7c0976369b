package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/vocab"
)

// DefaultMaxPendingProposals is how many proposals may wait for the batcher
// when Config.MaxPendingProposals is zero. The entries in flight (up to
// commands.MaxCommandsPerEntry commands each) are already with raft by the
// time proposals queue at all, so this is several entries' worth of
// backlog: enough to absorb a burst, small enough that a caller refused
// learns about saturation at once instead of waiting behind it.
const DefaultMaxPendingProposals = 4096

// MaxInflightEntries is how many log entries the batcher keeps with raft
// at once by default; proposals queue only while all of them are out. One:
// hashicorp/raft writes the leader's log before it replicates, so entries
// in flight together overlap little, and entries submitted apart are
// mostly written apart, each a log store append on every member (one
// fsync on raft-wal, the store of a new data dir; a bolt transaction, two
// fdatasyncs, on a data dir that records bolt). With one, everything that
// arrives during a commit goes out as the next entry: on the 2-core
// reference machine W3 at 64 clients ran 30 commands per fsync and 40 %
// more writes per second than with 8 (bench/RESULTS.md, "Earning it").
const MaxInflightEntries = 1

// MaxInflightEntriesLimit bounds Config.MaxInflightEntries: raft's own
// pipeline (MaxAppendEntries) never needs more entries than this to keep
// the followers busy.
const MaxInflightEntriesLimit = 64

// OverloadRetryAfter is the wait an overloaded refusal suggests to its
// caller: about the time a saturated pipeline takes to commit a few entries.
const OverloadRetryAfter = 100 * time.Millisecond

// routineReserve is extra channel room for leader routines' proposals,
// which wait for room instead of being refused (commands.AsRoutine), so a
// client flood cannot starve the routines that keep the cluster healthy.
const routineReserve = 256

// ErrOverloaded is wrapped by every *OverloadedError: the proposal queue
// was full, and nothing was submitted.
var ErrOverloaded = vocab.NewSentinel(vocab.ClassExhausted, "proposal queue is full")

// OverloadedError is Propose's refusal of a proposal when the queue in
// front of raft holds Max proposals already. The proposal was not
// submitted; asking again after RetryAfter may succeed.
type OverloadedError struct {
	Pending    int64         // proposals waiting when this one was refused
	Max        int64         // the queue's bound (Config.MaxPendingProposals)
	RetryAfter time.Duration // a hint for when to try again
}

func (e *OverloadedError) Error() string {
	return fmt.Sprintf("%v: %d proposals are waiting for the log (max %d); not submitted, retry after %v",
		ErrOverloaded, e.Pending, e.Max, e.RetryAfter)
}

// Is makes errors.Is(err, ErrOverloaded) true.
func (e *OverloadedError) Is(target error) bool {
	return target == ErrOverloaded || errors.Is(ErrOverloaded, target)
}

// QueueStats is the proposal queue as a scrape sees it.
type QueueStats struct {
	Max         int64  // the bound
	Pending     int64  // proposals waiting for the batcher now
	Inflight    int    // log entries with raft now, not yet answered (at most MaxInflight, plus one chained)
	MaxInflight int    // Config.MaxInflightEntries
	Admitted    uint64 // proposals admitted so far
	Rejected    uint64 // proposals refused with *OverloadedError so far
}

// proposalQueue is the bounded admission in front of the batcher. A
// caller's proposal is admitted only while fewer than max wait (fail fast:
// a caller never waits behind a saturated pipeline); a leader routine's
// proposal always is, and waits for channel room instead.
type proposalQueue struct {
	ch       chan *proposal
	max      int64
	pending  atomic.Int64
	admitted atomic.Uint64
	rejected atomic.Uint64
}

func newProposalQueue(max int) *proposalQueue {
	return &proposalQueue{ch: make(chan *proposal, max+routineReserve), max: int64(max)}
}

// offer admits p or refuses it. wait is set for a leader routine's
// proposal. On an error p was not queued.
func (q *proposalQueue) offer(ctx context.Context, p *proposal, wait bool, closed <-chan struct{}) error {
	if n := q.pending.Add(1); n > q.max && !wait {
		q.pending.Add(-1)
		q.rejected.Add(1)
		return &OverloadedError{Pending: n - 1, Max: q.max, RetryAfter: OverloadRetryAfter}
	}
	select {
	case q.ch <- p:
		q.admitted.Add(1)
		return nil
	case <-ctx.Done():
		q.pending.Add(-1)
		return fmt.Errorf("propose %s: %w (not submitted)", p.cmd.Type, ctx.Err())
	case <-closed:
		q.pending.Add(-1)
		return ErrShuttingDown
	}
}

// taken is called by the batcher for each proposal it receives.
func (q *proposalQueue) taken() { q.pending.Add(-1) }

func (q *proposalQueue) stats() QueueStats {
	return QueueStats{Max: q.max, Pending: max(q.pending.Load(), 0), Admitted: q.admitted.Load(), Rejected: q.rejected.Load()}
}
