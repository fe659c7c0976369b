package manifest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/testutil"
)

// holdsNothing fails t if any of ids is locked.
func holdsNothing(t *testing.T, l *segmentLocks, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if !l.tryLock(id) {
			t.Fatalf("segment %d is still locked", id)
		}
		l.unlock(id)
	}
}

// A batch whose all-or-nothing attempts keep failing switches to ordered
// blocking once the escalation period has passed, instead of timing out:
// it then gets the key as soon as the holder lets go.
func TestAcquireSegmentManifestLocksEscalatesInsteadOfTimingOut(t *testing.T) {
	l := newSegmentLocks()
	clock := clockwork.NewFakeClock()
	if !l.tryLock(2) {
		t.Fatal("lock 2")
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.lockMany(context.Background(), clock, []int64{3, 1, 2}, time.Second)
		done <- err
	}()
	// Drive the backoff timers past the escalation period: every round
	// the batch waits on one backoff timer, all-or-nothing still fails.
	// Once past it, the batch stops using timers (it blocks in order).
	total := time.Duration(0)
	for {
		bctx, bcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := clock.BlockUntilContext(bctx, 1)
		bcancel()
		if err != nil {
			if total < time.Second {
				t.Fatalf("the batch stopped backing off after %v, before the escalation period", total)
			}
			break
		}
		if total > 2*time.Second {
			t.Fatalf("still backing off %v after the escalation period", total-time.Second)
		}
		clock.Advance(LockBackoffMax)
		total += LockBackoffMax
	}
	// Escalated: it blocks in order (holding 1, waiting for 2) and never
	// gives up on its own.
	select {
	case err := <-done:
		t.Fatalf("lockMany returned %v while segment 2 was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	l.unlock(2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lockMany did not complete after segment 2 was released")
	}
	for _, id := range []int64{1, 2, 3} {
		if l.tryLock(id) {
			t.Fatalf("segment %d is not held by the batch", id)
		}
	}
	l.unlockMany([]int64{1, 2, 3})
	holdsNothing(t, l, 1, 2, 3)
}

// Under sustained contention on one of its keys (single committers
// taking and releasing it back to back), a batch still completes.
func TestAcquireSegmentManifestLocksCompletesUnderSustainedContention(t *testing.T) {
	l := newSegmentLocks()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if l.lock(ctx, 5) != nil {
					return
				}
				time.Sleep(time.Millisecond) // not a wait: the contender holds the key a moment
				l.unlock(5)
			}
		}()
	}
	testutil.Eventually(t, "the contenders to hold segment 5", func() bool {
		if l.tryLock(5) {
			l.unlock(5)
			return false
		}
		return true
	})
	for n := range 20 {
		waited, err := l.lockMany(context.Background(), clockwork.NewRealClock(), []int64{4, 5, 6}, 20*time.Millisecond)
		if err != nil {
			t.Fatalf("batch %d: %v", n, err)
		}
		if waited > 10*time.Second {
			t.Fatalf("batch %d waited %v", n, waited)
		}
		l.unlockMany([]int64{4, 5, 6})
	}
	cancel()
	wg.Wait()
	holdsNothing(t, l, 4, 5, 6)
}

// A caller's deadline is honoured both while retrying all-or-nothing and
// while blocking after escalation, and a batch that gives up holds nothing.
func TestAcquireSegmentManifestLocksRespectsContextCancel(t *testing.T) {
	for _, tc := range []struct {
		name       string
		escalation time.Duration
	}{{"retrying", time.Hour}, {"escalated", time.Nanosecond}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newSegmentLocks()
			if !l.tryLock(2) {
				t.Fatal("lock 2")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := l.lockMany(ctx, clockwork.NewRealClock(), []int64{1, 2, 3}, tc.escalation)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("lockMany: %v, want the deadline", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("gave up after %v", d)
			}
			holdsNothing(t, l, 1, 3)
			l.unlock(2)
			holdsNothing(t, l, 2)
		})
	}
}

// Batches over overlapping segments, run concurrently, all complete, and
// every segment ends with one version per batch that named it and every
// batch's key.
func TestCommitSegmentManifestsConcurrentOverlappingBatches(t *testing.T) {
	f := newFixture(t, Config{Escalation: 50 * time.Millisecond})
	segs := []int64{5, 6, 7, 8}
	for _, s := range segs {
		f.create(s)
	}
	var wg sync.WaitGroup
	var commits [9]atomic.Int64
	for b := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 5 {
				// Batch b names three of the four segments, rotating, in
				// an order of its own.
				var reqs []*coordpb.CommitSegmentManifestRequest
				for k := range 3 {
					s := segs[(b+n+k)%len(segs)]
					if b%2 == 1 {
						s = segs[(b+n+2-k)%len(segs)]
					}
					reqs = append(reqs, statsReq(s, fmt.Sprintf("b%d-%d", b, n), "f"))
					commits[s].Add(1)
				}
				if _, err := commitBatchProto(context.Background(), f.c, reqs, ""); err != nil {
					t.Errorf("batch %d/%d: %v", b, n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, s := range segs {
		want := 1 + commits[s].Load()
		rev := f.revision(s)
		if rev.Version != want || int64(len(rev.Stats)) != want-1 {
			t.Fatalf("segment %d: version %d with %d stats keys, want version %d", s, rev.Version, len(rev.Stats), want)
		}
	}
}

// Disjoint batches proceed concurrently: one batch blocked in its
// revision write does not hold up a batch of other segments.
func TestCommitSegmentManifestsConcurrentDisjointBatches(t *testing.T) {
	gs := newGateStore(nil)
	f := newFixture(t, Config{})
	gs.Store = f.store
	f = &fixture{t: t, l: f.l, store: gs, c: New(f.l, Config{Store: gs})}
	for _, s := range []int64{5, 6, 7, 8} {
		f.create(s)
	}
	release := gs.hold("/5/manifest-2")
	first := make(chan error, 1)
	go func() {
		_, err := commitBatchProto(context.Background(), f.c, []*coordpb.CommitSegmentManifestRequest{statsReq(5, "a", "f"), statsReq(6, "a", "f")}, "")
		first <- err
	}()
	<-gs.entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := commitBatchProto(ctx, f.c, []*coordpb.CommitSegmentManifestRequest{statsReq(7, "b", "f"), statsReq(8, "b", "f")}, ""); err != nil {
		t.Fatalf("disjoint batch while another is in its revision write: %v", err)
	}
	if f.version(7) != 2 || f.version(8) != 2 || f.version(5) != 1 {
		t.Fatalf("versions 5:%d 7:%d 8:%d", f.version(5), f.version(7), f.version(8))
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if f.version(5) != 2 || f.version(6) != 2 {
		t.Fatalf("versions 5:%d 6:%d", f.version(5), f.version(6))
	}
}
