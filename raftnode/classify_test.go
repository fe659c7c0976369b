package raftnode_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode"
)

// TestClassifyApplyError pins what a proposer is told when raft's Apply
// fails. Only "not the leader" (raft refused the entry before appending it)
// means nothing was done; every error after raft accepted the entry —
// leadership lost while it was in flight above all — may have committed it,
// so it must be outcome-unknown and never a NotLeaderError, or a client
// would record a committed write as failed and retry it as new.
func TestClassifyApplyError(t *testing.T) {
	c := newCluster(t, 1)
	n := c.node(c.waitLeader())
	cases := []struct {
		err     error
		unknown bool // ErrOutcomeUnknown; otherwise a NotLeaderError
	}{
		{raft.ErrLeadershipLost, true},
		{fmt.Errorf("apply: %w", raft.ErrLeadershipLost), true},
		{raft.ErrEnqueueTimeout, true},
		{raft.ErrRaftShutdown, true},
		{raft.ErrAbortedByRestore, true},
		{errors.New("something raft never said before"), true},
		{raft.ErrNotLeader, false},
	}
	for _, tc := range cases {
		got := n.ClassifyApplyError(tc.err)
		var nle *raftnode.NotLeaderError
		isNotLeader := errors.As(got, &nle)
		isUnknown := errors.Is(got, raftnode.ErrOutcomeUnknown)
		switch {
		case tc.unknown && (!isUnknown || isNotLeader):
			t.Errorf("%v -> %v (outcome unknown %v, not leader %v); want outcome unknown only", tc.err, got, isUnknown, isNotLeader)
		case !tc.unknown && (!isNotLeader || isUnknown):
			t.Errorf("%v -> %v (outcome unknown %v, not leader %v); want NotLeaderError only", tc.err, got, isUnknown, isNotLeader)
		}
	}
}
