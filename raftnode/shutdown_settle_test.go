package raftnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/testutil"
)

// TestShutdownAnswersEntriesAlreadyWithRaft: an entry that is committed
// and queued for the apply loop when Shutdown starts is still answered by
// raft before raft stops. hashicorp/raft drops such an entry's future when
// it stops (its apply loop returns without draining the queue), so without
// Shutdown first letting the entries in flight be answered, the goroutine
// waiting for that future (and its inflight slot) would stay blocked for
// good about half the time.
func TestShutdownAnswersEntriesAlreadyWithRaft(t *testing.T) {
	for round := range 8 {
		n, stalled := newStalledLeader(t)
		held := startReserve(context.Background(), n)
		stalled.waitEntered(t)
		heldIndex := n.Raft().LastIndex()
		// A chained proposal goes out beyond the one entry in flight, so
		// it commits behind the held entry and waits in raft's apply queue.
		queued := startReserve(context.Background(), n, commands.Chained())
		testutil.Eventually(t, "the second entry committed", func() bool { return n.Raft().CommitIndex() > heldIndex })

		stopped := make(chan error, 1)
		go func() { stopped <- n.Shutdown() }()
		time.Sleep(20 * time.Millisecond) // Shutdown is under way
		stalled.release()
		if err := <-stopped; err != nil {
			t.Fatalf("round %d: shutdown: %v", round, err)
		}
		if q := n.ProposalQueue(); q.Inflight != 0 {
			t.Fatalf("round %d: %d entries still unanswered by raft after Shutdown", round, q.Inflight)
		}
		for i, ch := range []chan proposeResult{held, queued} {
			select {
			case <-ch: // a result, or "outcome unknown: node shut down"
			case <-time.After(opTimeout):
				t.Fatalf("round %d: proposal %d was never answered", round, i)
			}
		}
	}
}
