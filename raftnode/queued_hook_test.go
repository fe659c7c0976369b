package raftnode_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

// TestProposeCallsQueuedHookBeforeCommitInQueueOrder: Propose calls the
// commands.OnQueued function once the command is queued, while it is not
// yet applied (here the apply loop is stalled, so a hook called at commit
// would never come), and the commands are applied in the order their
// hooks were called. A proposal refused before queueing never calls it.
func TestProposeCallsQueuedHookBeforeCommitInQueueOrder(t *testing.T) {
	n, stalled := newStalledLeader(t)
	blocker := make(chan error, 1)
	go func() {
		_, err := propose(context.Background(), n, &logpb.ReserveIDs{Count: 1}, "")
		blocker <- err
	}()
	stalled.waitEntered(t)
	release := stalled.release
	before := n.State().NextID()

	const k = 5
	results := make([]chan proposeResult, k)
	for i := range k {
		hooked := make(chan struct{})
		var calls atomic.Int32
		hook := commands.OnQueued(func() {
			if calls.Add(1) == 1 {
				close(hooked)
			}
		})
		results[i] = make(chan proposeResult, 1)
		go func() {
			res, err := propose(context.Background(), n, &logpb.ReserveIDs{Count: 1}, "", hook)
			if calls.Load() != 1 {
				t.Errorf("proposal %d: hook called %d times, want once", i, calls.Load())
			}
			results[i] <- proposeResult{res, err}
		}()
		select {
		case <-hooked:
		case <-time.After(5 * time.Second):
			t.Fatalf("proposal %d: no queued hook while the log is stalled (called after commit?)", i)
		}
		if got := n.State().NextID(); got != before {
			t.Fatalf("proposal %d: applied state moved (%d → %d) before the hooks", i, before, got)
		}
	}
	release()
	if err := <-blocker; err != nil {
		t.Fatal(err)
	}
	wantReservedInOrder(t, "hook", results)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	refused := commands.OnQueued(func() { t.Error("hook called for a proposal refused before queueing") })
	if _, err := propose(ctx, n, &logpb.ReserveIDs{Count: 1}, "", refused); err == nil {
		t.Fatal("a proposal with an ended context succeeded")
	}
}

// stalledApply holds a one-member cluster's apply loop: once armed, the
// next entry applied blocks in the apply observer until release, so the
// batcher's entry stays in flight.
type stalledApply struct {
	stall   atomic.Bool
	entered chan struct{}
	unstall chan struct{}
	once    sync.Once
}

// newStalledLeader starts a one-member cluster whose apply loop stalls at
// the next entry (the stall is armed once the leader has applied one
// proposal) and returns its leader.
func newStalledLeader(t *testing.T) (*raftnode.Node, *stalledApply) {
	t.Helper()
	s := &stalledApply{entered: make(chan struct{}, 1), unstall: make(chan struct{})}
	c := newCluster(t, 1, withSetup(func(_ int, n *raftnode.Node) {
		n.SetApplyObserver(func(uint64, int) {
			if s.stall.Load() {
				select {
				case s.entered <- struct{}{}:
				default:
				}
				<-s.unstall
			}
		})
	}))
	t.Cleanup(s.release) // before the cluster's shutdown, which waits for the FSM
	n := c.node(c.waitLeader())
	mustPropose(t, n, &logpb.ReserveIDs{Count: 1}, "")
	s.stall.Store(true)
	return n, s
}

// waitEntered waits until the apply loop is stalled in an entry.
func (s *stalledApply) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(opTimeout):
		t.Fatal("the blocking entry was never applied")
	}
}

// release lets the apply loop go on, for good.
func (s *stalledApply) release() { s.stall.Store(false); s.once.Do(func() { close(s.unstall) }) }

// proposeResult is what a ReserveIDs proposal made in a goroutine got.
type proposeResult struct {
	res *logpb.Result
	err error
}

// startReserve proposes ReserveIDs{Count: 1} on n from a goroutine and
// returns where its result will arrive.
func startReserve(ctx context.Context, n *raftnode.Node, opts ...commands.Option) chan proposeResult {
	ch := make(chan proposeResult, 1)
	go func() {
		res, err := propose(ctx, n, &logpb.ReserveIDs{Count: 1}, "", opts...)
		ch <- proposeResult{res, err}
	}()
	return ch
}

// wantReservedInOrder receives every result in the order given (the
// order the proposals were queued, by their order) and fails unless each
// succeeded and reserved IDs above the one before: the log applied them
// in that order.
func wantReservedInOrder(t *testing.T, order string, results []chan proposeResult) {
	t.Helper()
	var last uint64
	for i, ch := range results {
		r := <-ch
		if r.err != nil {
			t.Fatalf("proposal %d: %v", i, r.err)
		}
		first, _ := idRange(t, r.res)
		if first <= last {
			t.Fatalf("proposal %d reserved %d after %d: log order is not %s order", i, first, last, order)
		}
		last = first
	}
}
