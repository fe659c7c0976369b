package broadcaster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/testutil"
)

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestHandOffGrantsTheNextHolderBehindTheTask: a guard handed off gives
// its keys to the waiters (and to newcomers) at once, and each is told the
// task it is ordered behind until that task releases for good.
func TestHandOffGrantsTheNextHolderBehindTheTask(t *testing.T) {
	lt := newLockTable()
	x := []*logpb.ResourceKey{dbKey("db"), collKey("db", "a", false)}
	g1, ok := lt.tryLock(x)
	if !ok {
		t.Fatal("first lock")
	}
	got := make(chan *lockGuard, 1)
	go func() {
		g, _, err := lt.lock(context.Background(), x, nil)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- g
	}()
	testutil.Eventually(t, "waiter queued", func() bool { _, _, w := lt.holders(x[1]); return w == 1 })
	g1.handOff(11)
	g2 := <-got
	// Both keys: the shared DB key is not a conflict, the exclusive
	// collection key is, and the task is listed once.
	if ids := predecessorIDs(g2.pending()); !slices.Equal(ids, []uint64{11}) {
		t.Fatalf("waiter ordered behind %v, want [11]", ids)
	}
	if g2.behind[0].key != "CollectionName:db:a@X" {
		t.Fatalf("predecessor found on %q", g2.behind[0].key)
	}
	if _, ex, _ := lt.holders(x[1]); !ex {
		t.Fatal("the waiter does not hold the key")
	}
	// A newcomer queues behind the new holder as usual.
	if _, ok := lt.tryLock(x); ok {
		t.Fatal("a newcomer took a held key")
	}
	done := g2.behind[0].done
	g1.release()
	if !isDone(done) || len(g2.pending()) != 0 {
		t.Fatal("the predecessor's release did not end the wait")
	}
	g1.release() // idempotent
	g1.handOff(11)
	g2.release()
	if n := lt.size(); n != 0 {
		t.Fatalf("%d keys left in the table", n)
	}
}

// TestHandOffModes: only conflicting holds are ordered behind a finishing
// task; a task finishing on a key that nobody waits for is found by the
// next newcomer; its record goes when it releases.
func TestHandOffModes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second bool // shared?
		behind        bool
	}{
		{"shared after shared", true, true, false},
		{"exclusive after shared", true, false, true},
		{"shared after exclusive", false, true, true},
		{"exclusive after exclusive", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLockTable()
			g1, _ := lt.tryLock([]*logpb.ResourceKey{collKey("db", "a", tc.first)})
			g1.handOff(5)
			if n := lt.size(); n != 1 {
				t.Fatalf("a handed-off key is forgotten while its task finishes (%d keys)", n)
			}
			g2, ok := lt.tryLock([]*logpb.ResourceKey{collKey("db", "a", tc.second)})
			if !ok {
				t.Fatal("a handed-off key was not free")
			}
			_, _, err := lt.lock(context.Background(), nil, nil) // no keys: nothing to wait for
			if err != nil {
				t.Fatal(err)
			}
			g3, _, err := lt.lock(context.Background(), []*logpb.ResourceKey{collKey("db", "b", tc.second)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(g3.pending()) != 0 {
				t.Fatal("another key's holder is ordered behind the task")
			}
			g3.release()
			// tryLock (re-locking recovered tasks) does not collect
			// predecessors; lock does.
			g2.release()
			g4, _, err := lt.lock(context.Background(), []*logpb.ResourceKey{collKey("db", "a", tc.second)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(g4.pending()) == 1; got != tc.behind {
				t.Fatalf("ordered behind the finishing task: %v, want %v", got, tc.behind)
			}
			g1.release()
			g4.release()
			if n := lt.size(); n != 0 {
				t.Fatalf("%d keys left", n)
			}
		})
	}
}

// TestHandOffAfterClose: a closed table ignores hand-offs, and a guard
// handed off before the close still ends its successors' wait.
func TestHandOffAfterClose(t *testing.T) {
	lt := newLockTable()
	k := []*logpb.ResourceKey{collKey("db", "a", false)}
	g1, _ := lt.tryLock(k)
	g1.handOff(1)
	g2, _, err := lt.lock(context.Background(), k, nil)
	if err != nil {
		t.Fatal(err)
	}
	lt.close()
	g2.handOff(2) // no-op
	g1.release()
	if len(g2.pending()) != 0 {
		t.Fatal("the predecessor's wait did not end")
	}
	g2.release()
}

// TestPipelinedCreateFollowsTheCompletion: a conflicting broadcast that
// names its targets proposes its create as soon as the task ahead of it
// has queued its completion, ordered behind that task; the log applies it
// right after the completion, so it is never refused and each broadcast
// costs two commands.
func TestPipelinedCreateFollowsTheCompletion(t *testing.T) {
	h, metrics := harnessWithMetrics(t)
	h.run(h.m, testTerm)
	release := make(chan struct{})
	h.app.setOnAppend(func(c appendCall) error {
		if c.ID == firstTaskID(h) {
			select {
			case <-release:
			case <-h.deadline.Done():
			}
		}
		return nil
	})
	keys := []*logpb.ResourceKey{dbKey("db"), collKey("db", "c", false)}
	targets := []string{h.vch(1, 100), h.vch(2, 100)}
	first := broadcastAsync(ctxTimeout(t, 20*time.Second), h.m, Request{MessageType: "AlterCollection", ResourceKeys: keys, VChannels: targets})
	h.eventually("first task appending", func() bool { return len(h.app.Calls()) > 0 })
	second := broadcastAsync(ctxTimeout(t, 20*time.Second), h.m, Request{MessageType: "AlterCollection", ResourceKeys: keys, VChannels: targets})
	h.eventually("second waiting for the key", func() bool { _, _, w := locksOf(h.m).holders(keys[1]); return w == 1 })
	// Hold the first completion between its place in the log and its
	// apply until the next create has queued behind it, as a raft round
	// does; without the hold the fake applies it before the second
	// caller even runs. Queueing the completion hands the key off, so the
	// woken caller may queue its create before this hook runs: the hook
	// waits for a create seen queued, not for the count to grow after it
	// looked. It gives up only at the test's deadline, failing the test
	// without blocking the proposer (t.Fatal would end this goroutine and
	// wedge the fake leader's order).
	createQueued := make(chan struct{})
	var seenCreate sync.Once
	h.leader.SetAfterQueued(func(body proto.Message) {
		switch b := body.(type) {
		case *logpb.CreateBroadcast:
			seenCreate.Do(func() { close(createQueued) })
		case *logpb.CompleteBroadcast:
			if b.BroadcastId != firstTaskID(h) {
				return
			}
			select {
			case <-createQueued:
			case <-h.deadline.Done():
				t.Errorf("no create queued behind the completion of task %d", b.BroadcastId)
			}
		}
	})
	close(release)
	r1, r2 := h.wait(first), h.wait(second)
	if r1.err != nil || r2.err != nil {
		t.Fatalf("broadcasts: %v, %v", r1.err, r2.err)
	}
	var kinds []string
	for _, b := range h.leader.Applied() {
		switch b := b.(type) {
		case *logpb.CreateBroadcast:
			kinds = append(kinds, "create")
			if len(b.AfterBroadcasts) > 0 {
				kinds[len(kinds)-1] += " after " + fmt.Sprint(b.AfterBroadcasts)
			}
		case *logpb.CompleteBroadcast:
			kinds = append(kinds, "complete "+fmt.Sprint(b.BroadcastId))
		case *logpb.AckBroadcast:
			kinds = append(kinds, "ack")
		}
	}
	want := []string{"create", "complete " + fmt.Sprint(r1.res.BroadcastID), "create after " + fmt.Sprint([]uint64{r1.res.BroadcastID}), "complete " + fmt.Sprint(r2.res.BroadcastID)}
	if !slices.Equal(kinds, want) {
		t.Fatalf("broadcast commands %q, want %q", kinds, want)
	}
	if got := promtest.ToFloat64(metrics.PipelinedCreates); got != 1 {
		t.Fatalf("pipelined creates %v, want 1", got)
	}
	if got := promtest.ToFloat64(metrics.CreatesReordered); got != 0 {
		t.Fatalf("reordered creates %v, want 0", got)
	}
	if n := locksOf(h.m).size(); n != 0 {
		t.Fatalf("%d keys left in the lock table", n)
	}
}

// firstTaskID is the ID of the oldest broadcast task, 0 before any.
func firstTaskID(h *harness) uint64 {
	ts := h.leader.State().BroadcastTasks()
	if len(ts) == 0 {
		return 0
	}
	return ts[0].Id
}

// TestPipelinedCreateWaitsForARefusedCompletion: when the completion the
// create was ordered behind is refused (the callback keeps failing), Apply
// refuses the create with REJECT_ORDER and nothing is created; the caller
// waits (or gives up with a lock timeout naming the key, leaving nothing
// behind) until the task ahead finishes, and then the same request is
// created and appended after it in every shared WAL.
func TestPipelinedCreateWaitsForARefusedCompletion(t *testing.T) {
	h, metrics := harnessWithMetrics(t)
	h.run(h.m, testTerm)
	key := collKey("db", "c", false)
	stuck := stuckCreateCollection(ctxTimeout(t, 20*time.Second), t, h, 100, dbKey("db"), key)
	var stuckID uint64
	h.eventually("callback refused", func() bool {
		for _, bt := range h.leader.State().PendingBroadcasts() {
			stuckID = bt.Id
			return bt.CallbackAttempts >= 1
		}
		return false
	})
	targets := []string{h.vch(0, 100), h.cch}
	req := Request{MessageType: "AlterCollection", ResourceKeys: []*logpb.ResourceKey{dbKey("db"), key}, VChannels: targets}

	// A caller whose deadline comes while it is ordered behind the stuck
	// task (the wait ends a little before the deadline, as a lock wait
	// does, so the caller learns which key held it).
	short, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	gaveUp := broadcastAsync(short, h.m, req)
	h.eventually("ordered behind the stuck task", func() bool { return h.m.awaitingPredecessors.Load() == 1 })
	r := h.wait(gaveUp)
	var lte *LockTimeoutError
	if !errors.As(r.err, &lte) || lte.Key != KeyName(key) || !strings.Contains(lte.Error(), "still finishing") || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("a caller giving up while ordered behind a task: %v", r.err)
	}
	if n := len(h.leader.State().PendingBroadcasts()); n != 1 {
		t.Fatalf("%d pending tasks after the caller gave up, want the stuck one", n)
	}
	refusedBefore := promtest.ToFloat64(metrics.CreatesReordered)
	if refusedBefore < 1 {
		t.Fatalf("no create was refused for its order (%v)", refusedBefore)
	}

	next := broadcastAsync(ctxTimeout(t, 20*time.Second), h.m, req)
	h.eventually("refused and waiting", func() bool {
		return promtest.ToFloat64(metrics.CreatesReordered) > refusedBefore && h.m.awaitingPredecessors.Load() == 1
	})
	h.never("created before the stuck task finished", 30*time.Millisecond, func() bool {
		return len(h.leader.State().PendingBroadcasts()) > 1
	})
	if err := h.m.Abandon(context.Background(), stuckID, "operator"); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	if r := h.wait(stuck); !errors.Is(r.err, ErrAbandoned) {
		t.Fatalf("stuck broadcast: %v", r.err)
	}
	r = h.wait(next)
	if r.err != nil || r.res.BroadcastID <= stuckID {
		t.Fatalf("ordered broadcast: id %d, %v (stuck task %d)", r.res.BroadcastID, r.err, stuckID)
	}
	for _, v := range targets {
		ids := h.app.walIDs(v)
		if i, j := slices.Index(ids, stuckID), slices.Index(ids, r.res.BroadcastID); i < 0 || j < i {
			t.Fatalf("%s: WAL order %v, want %d before %d", v, ids, stuckID, r.res.BroadcastID)
		}
	}
	if n := locksOf(h.m).size(); n != 0 {
		t.Fatalf("%d keys left in the lock table", n)
	}
}

// harnessWithMetrics is a harness whose manager records its metrics.
func harnessWithMetrics(t *testing.T) (*harness, *Metrics) {
	metrics, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, func(c *Config) { c.Metrics = metrics }), metrics
}
