package raftnode_test

import (
	"context"
	"testing"
	"time"
)

// TestQuorumRoundConfirmsAndRefuses: without a lease, a leadership check
// is a quorum round of heartbeats sent after it began: it confirms a
// leader with a quorum, appends nothing to the log, and refuses once the
// leader is cut off (answers to heartbeats sent before do not count), and
// a follower's round refuses at once.
func TestQuorumRoundConfirmsAndRefuses(t *testing.T) {
	c := newCluster(t, 3)
	x := c.waitLeader()
	xn := c.node(x)
	ctx := context.Background()
	before := xn.Raft().LastIndex()
	for round := 0; round < 3; round++ {
		if err := xn.VerifyLeader(ctx); err != nil {
			t.Fatalf("round %d: verify leader: %v", round, err)
		}
	}
	if after := xn.Raft().LastIndex(); after != before {
		t.Fatalf("leadership checks wrote to the log (last index %d -> %d)", before, after)
	}
	if err := c.node((x + 1) % 3).VerifyLeader(ctx); err == nil {
		t.Fatal("a follower confirmed itself as leader")
	}
	c.isolate(x)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := xn.VerifyLeader(ctx); err == nil {
		t.Fatal("an isolated leader without a lease confirmed itself")
	}
}

// BenchmarkQuorumRound is one leadership check without a lease (3
// in-process members, real bolt files).
func BenchmarkQuorumRound(b *testing.B) {
	c := newCluster(b, 3)
	xn := c.node(c.waitLeader())
	ctx := context.Background()
	for b.Loop() {
		if err := xn.VerifyLeader(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
