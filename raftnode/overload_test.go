package raftnode_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/testutil"
)

// TestProposeOverloadedFailsFast saturates a real node's apply pipeline
// (its state machine is held after one entry) and floods it with more
// proposals than the eight in-flight entries and the queue can hold. The
// proposals past the bound are refused at once with *OverloadedError
// while the held ones still wait, and none of them is submitted; a leader
// routine's proposal into the full queue is not refused but waits; once
// the pipeline moves, every admitted proposal and the routine's commit, and
// exactly their IDs are reserved.
func TestProposeOverloadedFailsFast(t *testing.T) {
	const (
		maxPending = 16
		// More than 8 in-flight entries of 512 commands, one proposal
		// waiting for a slot and the queue: some must be refused.
		flood = 8*512 + 1 + maxPending + 500
	)
	var gate atomic.Pointer[chan struct{}]
	trigger, routineRes := make(chan struct{}), make(chan error, 1)
	c := newCluster(t, 1,
		withConfig(func(_ int, cfg *raftnode.Config) { cfg.MaxPendingProposals = maxPending }),
		withSetup(func(_ int, n *raftnode.Node) {
			n.SetApplyObserver(func(uint64, int) {
				if g := gate.Load(); g != nil {
					<-*g
				}
			})
			n.AddLeaderRoutine("overload-test", func(ctx context.Context, _ uint64, p commands.Proposer) {
				select {
				case <-trigger:
				case <-ctx.Done():
					return
				}
				res, err := commands.Propose(ctx, p, &logpb.ReserveIDs{Count: 1000}, "")
				if err == nil && res.Rejection != nil {
					err = errors.New(res.Rejection.Message)
				}
				routineRes <- err
			})
		}))
	n := c.node(c.waitLeader())
	start := linearizableRead(t, n).NextID()
	base := n.ProposalQueue()
	if base.Max != maxPending {
		t.Fatalf("queue bound %d, want %d", base.Max, maxPending)
	}
	offered := func() uint64 { s := n.ProposalQueue(); return s.Admitted + s.Rejected - base.Admitted - base.Rejected }

	held := make(chan struct{})
	gate.Store(&held)
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)

	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(opTimeout))
	defer cancel()
	var refused, done atomic.Int64
	var wg sync.WaitGroup
	caller := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := propose(ctx, n, &logpb.ReserveIDs{Count: 1}, "")
			var oe *raftnode.OverloadedError
			switch {
			case errors.As(err, &oe):
				if oe.Max != maxPending || !errors.Is(err, raftnode.ErrOverloaded) {
					t.Errorf("refusal %v (%+v), want max %d wrapping ErrOverloaded", err, oe, maxPending)
				}
				refused.Add(1)
			case err != nil || res.Rejection != nil:
				t.Errorf("admitted proposal: %v, %v", res, err)
			default:
				done.Add(1)
			}
		}()
	}
	for i := 0; i < flood; i++ {
		caller()
	}
	testutil.Eventually(t, "every proposal of the flood to be admitted or refused", func() bool {
		return offered() == flood
	})
	slots := int64(n.ProposalQueue().MaxInflight)
	if r := refused.Load(); r < flood-(slots*512+1+maxPending) {
		t.Fatalf("%d of %d refused, want at least %d", r, flood, flood-(slots*512+1+maxPending))
	}
	if d := done.Load(); d != 0 {
		t.Fatalf("%d proposals finished while the state machine was held", d)
	}
	// Top up until the pipeline is saturated: every slot's entry with raft
	// (held) and a full queue. Nothing moves then.
	for sent := uint64(flood); ; {
		if s := n.ProposalQueue(); s.Inflight == s.MaxInflight && s.Pending == maxPending {
			break
		}
		caller()
		sent++
		testutil.Eventually(t, "a top-up proposal to be admitted or refused", func() bool { return offered() == sent })
	}

	// A leader routine proposes into the full queue: admitted, it waits.
	before := n.ProposalQueue()
	close(trigger)
	testutil.Eventually(t, "the routine's proposal to be admitted", func() bool {
		return n.ProposalQueue().Admitted == before.Admitted+1
	})
	if s := n.ProposalQueue(); s.Pending != maxPending+1 || s.Rejected != before.Rejected {
		t.Fatalf("queue %+v after the routine's proposal, want %d pending and no new refusal", s, maxPending+1)
	}

	release()
	wg.Wait()
	if err := <-routineRes; err != nil {
		t.Fatalf("leader routine's proposal: %v", err)
	}
	admitted := done.Load()
	t.Logf("flood %d: %d committed, %d refused", flood, admitted, refused.Load())
	if got, want := linearizableRead(t, n).NextID(), start+uint64(admitted)+1000; got != want {
		t.Fatalf("NextID %d, want %d: refused proposals must not reach the log", got, want)
	}
	s := n.ProposalQueue()
	if s.Pending != 0 || s.Rejected-base.Rejected != uint64(refused.Load()) {
		t.Fatalf("queue %+v after the flood, want empty with %d rejections counted", s, refused.Load())
	}
}
