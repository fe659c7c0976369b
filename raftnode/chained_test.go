package raftnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/testutil"
)

// TestChainedProposalGoesOutBeyondTheInflightBound: with the one entry
// slot taken (its entry held in flight by a stalled apply loop), a chained
// proposal at the head of the queue still goes out, in a second entry; a
// normal proposal waits for the slot, and a chained one queued behind it
// waits too (the queue's order holds). Everything applies in queue order.
func TestChainedProposalGoesOutBeyondTheInflightBound(t *testing.T) {
	n, stalled := newStalledLeader(t)
	if got := n.ProposalQueue().MaxInflight; got != 1 {
		t.Fatalf("max inflight %d, want the default 1", got)
	}

	blocker := startReserve(context.Background(), n)
	stalled.waitEntered(t)
	first := startReserve(context.Background(), n, commands.Chained())
	testutil.Eventually(t, "the chained proposal out in a second entry", func() bool { return n.ProposalQueue().Inflight == 2 })
	normal := startReserve(context.Background(), n)
	testutil.Eventually(t, "the normal proposal waiting", func() bool { return n.ProposalQueue().Pending == 1 })
	behind := startReserve(context.Background(), n, commands.Chained())
	testutil.Eventually(t, "the chained proposal behind it waiting", func() bool { return n.ProposalQueue().Pending == 2 })
	testutil.Never(t, "a third entry out", 50*time.Millisecond, func() bool { return n.ProposalQueue().Inflight > 2 })

	stalled.release()
	wantReservedInOrder(t, "queue", []chan proposeResult{blocker, first, normal, behind})
	if s := n.ProposalQueue(); s.Inflight != 0 || s.Pending != 0 {
		t.Fatalf("queue after the run: %+v", s)
	}
}
