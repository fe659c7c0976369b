package raftnode_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/commands/proposertest"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/testutil"
)

// TestNodeProposerConformance: the raft node reads a proposal as the
// controllers' fake leader does (controllertest runs the same checks).
// Its queue is saturated by holding the state machine (an apply observer
// that blocks) and proposing until the entries in flight and the queue
// are full.
func TestNodeProposerConformance(t *testing.T) {
	const maxPending = 4
	var gate atomic.Pointer[chan struct{}]
	c := newCluster(t, 1,
		withConfig(func(_ int, cfg *raftnode.Config) { cfg.MaxPendingProposals = maxPending }),
		withSetup(func(_ int, n *raftnode.Node) {
			n.SetApplyObserver(func(uint64, int) {
				if g := gate.Load(); g != nil {
					<-*g
				}
			})
		}))
	n := c.node(c.waitLeader())
	saturate := func(t *testing.T) func() {
		held := make(chan struct{})
		gate.Store(&held)
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(opTimeout))
		base := n.ProposalQueue()
		offered := func() uint64 { s := n.ProposalQueue(); return s.Admitted + s.Rejected - base.Admitted - base.Rejected }
		var wg sync.WaitGroup
		for sent := uint64(0); ; {
			if s := n.ProposalQueue(); s.Inflight == s.MaxInflight && s.Pending == s.Max {
				break
			}
			sent++
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = propose(ctx, n, &logpb.ReserveIDs{Count: 1}, "") // admitted (applies at release) or refused
			}()
			testutil.Eventually(t, "a proposal filling the queue to be admitted or refused", func() bool { return offered() == sent })
		}
		return func() {
			gate.Store(nil)
			close(held)
			wg.Wait()
			cancel()
		}
	}
	proposertest.Conformance(t, proposertest.Subject{P: n, Term: n.EstablishedTerm(), Saturate: saturate})
}
