package raftnode_test

import (
	"context"
	"testing"
	"time"
)

// TestQuorumRoundCommitsAFreshEntry: without a lease, a leadership check is
// answered by committing an entry appended after the check began, never by
// answers to heartbeats that may have left before it (a leader resumed from
// a pause could count one from before the pause). The proof is in the log:
// each round adds an entry of the leader's term, and a round that cannot
// commit fails.
func TestQuorumRoundCommitsAFreshEntry(t *testing.T) {
	c := newCluster(t, 3)
	x := c.waitLeader()
	xn := c.node(x)
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		before := xn.Raft().LastIndex()
		if err := xn.VerifyLeader(ctx); err != nil {
			t.Fatalf("round %d: verify leader: %v", round, err)
		}
		if after := xn.Raft().LastIndex(); after <= before {
			t.Fatalf("round %d: the leadership check appended nothing (last index %d -> %d)", round, before, after)
		}
	}
	c.isolate(x)
	ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := xn.VerifyLeader(ctx); err == nil {
		t.Fatal("an isolated leader without a lease confirmed itself")
	}
}
