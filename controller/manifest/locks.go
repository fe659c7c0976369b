package manifest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Lock acquisition for batches (docs/semantics.md#manifest-batches):
// all-or-nothing attempts with a doubling backoff, then, once the
// escalation threshold has passed, ordered blocking acquisition. A fixed
// timeout would starve a large batch under sustained contention; blocking
// in sorted order cannot deadlock (every batch takes keys in the same
// order) and each key's waiters are served in arrival order.
const (
	LockBackoffMin       = 200 * time.Microsecond
	LockBackoffMax       = 20 * time.Millisecond
	LockEscalationPeriod = 30 * time.Second
)

// segmentLocks is the per-segment lock table: one channel-based mutex per
// segment in use, removed when nobody holds or waits for it. Different
// segments never wait for each other.
type segmentLocks struct {
	mu    sync.Mutex
	locks map[int64]*segLock
}

type segLock struct {
	ch   chan struct{} // holds a token while locked
	refs int           // holders and waiters
}

func newSegmentLocks() *segmentLocks { return &segmentLocks{locks: map[int64]*segLock{}} }

func (t *segmentLocks) ref(id int64) *segLock {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.locks[id]
	if !ok {
		l = &segLock{ch: make(chan struct{}, 1)}
		t.locks[id] = l
	}
	l.refs++
	return l
}

func (t *segmentLocks) unref(id int64, l *segLock) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(t.locks, id)
	}
}

// lock blocks until id is locked or ctx ends. Waiters on one key are
// served in arrival order (a channel's senders queue FIFO).
func (t *segmentLocks) lock(ctx context.Context, id int64) error {
	l := t.ref(id)
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		t.unref(id, l)
		return ctx.Err()
	}
}

// tryLock locks id if it is free.
func (t *segmentLocks) tryLock(id int64) bool {
	l := t.ref(id)
	select {
	case l.ch <- struct{}{}:
		return true
	default:
		t.unref(id, l)
		return false
	}
}

// unlock releases id (locked by lock or tryLock).
func (t *segmentLocks) unlock(id int64) {
	t.mu.Lock()
	l := t.locks[id]
	t.mu.Unlock()
	<-l.ch
	t.unref(id, l)
}

// tryLockMany locks every id or none.
func (t *segmentLocks) tryLockMany(ids []int64) bool {
	for i, id := range ids {
		if !t.tryLock(id) {
			t.unlockMany(ids[:i])
			return false
		}
	}
	return true
}

func (t *segmentLocks) unlockMany(ids []int64) {
	for _, id := range ids {
		t.unlock(id)
	}
}

// lockMany locks every id of a batch (sorted, distinct): all-or-nothing
// attempts with backoff until escalation, then blocking in order. It
// returns the time it waited; on ctx's end it holds nothing.
func (t *segmentLocks) lockMany(ctx context.Context, clock clockwork.Clock, ids []int64, escalation time.Duration) (time.Duration, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	start := clock.Now()
	backoff := LockBackoffMin
	for {
		if t.tryLockMany(ids) {
			return clock.Since(start), nil
		}
		if clock.Since(start) >= escalation {
			break
		}
		tm := clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			tm.Stop()
			return clock.Since(start), ctx.Err()
		case <-tm.Chan():
		}
		backoff = min(2*backoff, LockBackoffMax)
	}
	for i, id := range ids {
		if err := t.lock(ctx, id); err != nil {
			t.unlockMany(ids[:i])
			return clock.Since(start), err
		}
	}
	return clock.Since(start), nil
}
