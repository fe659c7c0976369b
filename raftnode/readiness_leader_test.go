package raftnode_test

import (
	"testing"

	"github.com/coordd/coordd/raftnode"
)

// TestLeaderReadinessReportsItsOwnCommitIndex (probe L18): the leader's
// readiness reports a leader commit index no lower than its own commit
// index, not the last one it heard as a follower (or none).
func TestLeaderReadinessReportsItsOwnCommitIndex(t *testing.T) {
	c := newCluster(t, 3)
	c.waitLeader()
	c.writeOnLeader("w", 20)
	var r raftnode.Readiness
	var id string
	waitFor(t, opTimeout, func() bool {
		l := c.waitLeader()
		id = c.node(l).ID()
		r = c.node(l).Readiness(raftnode.DefaultReadyMaxLag)
		return r.LeaderID == id // still the leader when it answered
	}, "a readiness answered by the leader")
	if r.LeaderCommitIndex < r.CommitIndex || r.CommitIndex < 20 {
		t.Fatalf("leader %s: leader commit index %d, its own commit index %d", id, r.LeaderCommitIndex, r.CommitIndex)
	}
}
