package raftnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/testutil"
)

// TestLinearizableReadWaitsForApply: an entry committed on the leader but
// not yet applied by its FSM (held by the apply observer, as a slow apply
// would) must be in any state a linearizable read started after the commit
// returns; so the read waits for the apply instead of answering from the
// older state. Today every acknowledged write is applied on the leader
// before it is acknowledged, so only a white-box test like this one shows
// the wait (the read index recipe's last step) is there.
func TestLinearizableReadWaitsForApply(t *testing.T) {
	gates := []*applyGate{newApplyGate(), newApplyGate(), newApplyGate()}
	c := newCluster(t, 3, withSetup(func(i int, n *raftnode.Node) { n.SetApplyObserver(gates[i].observe) }))
	for _, g := range gates {
		t.Cleanup(g.open)
	}
	l := c.waitLeader()
	leader := c.node(l)
	mustPropose(t, leader, &logpb.ReserveIDs{Count: 1}, "before")

	// Commit an entry whose apply on the leader is held.
	gates[l].arm()
	proposed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_, err := propose(ctx, leader, &logpb.ReserveIDs{Count: 1}, "held")
		proposed <- err
	}()
	<-gates[l].blocked
	target := leader.Raft().LastIndex()
	waitFor(t, opTimeout, func() bool { return leader.Raft().CommitIndex() >= target },
		"the held entry (index %d) to commit", target)
	if _, ok := leader.State().LookupRequest("held"); ok {
		t.Fatal("precondition: the held entry is already in the leader's state")
	}

	type readResult struct {
		st  *fsm.State
		err error
	}
	read := make(chan readResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		st, err := leader.LinearizableRead(ctx)
		read <- readResult{st, err}
	}()
	testutil.Never(t, "a linearizable read started after the commit returned before the entry was applied", 300*time.Millisecond, func() bool {
		select {
		case r := <-read:
			read <- r // for the checks below
			return true
		default:
			return false
		}
	})
	gates[l].open()
	var r readResult
	select {
	case r = <-read:
	case <-time.After(testutil.Timeout(opTimeout)):
		t.Fatal("the linearizable read did not return after the entry was applied")
	}
	if r.err != nil {
		t.Fatalf("linearizable read: %v", r.err)
	}
	if _, ok := r.st.LookupRequest("held"); !ok || r.st.AppliedIndex() < target {
		t.Fatalf("linearizable read returned applied index %d without the committed entry %d", r.st.AppliedIndex(), target)
	}
	if err := <-proposed; err != nil {
		t.Fatalf("held proposal: %v", err)
	}
}
