package raftnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

func withLeaseAndFaults(_ int, cfg *raftnode.Config) {
	cfg.LeaderLease = testLease
	cfg.FaultInjection = true
}

// checkNoSecondLeaderInLease waits until member cand is an established
// leader of a later term than holder, or holder's lease (which ends at
// leaseEnd) has run out, and fails the test if cand was established first.
// In that case it also shows the consequence: holder's linearizable read
// misses a write cand acknowledged before the read began.
func checkNoSecondLeaderInLease(t *testing.T, trial int, holder, cand *raftnode.Node, leaseEnd time.Time) {
	t.Helper()
	holderTerm := holder.EstablishedTerm()
	var established time.Time
	waitFor(t, opTimeout, func() bool {
		if cand.IsLeader() && cand.EstablishedTerm() > holderTerm {
			established = time.Now()
			return true
		}
		return time.Now().After(leaseEnd.Add(testLease))
	}, "member %s established or %s's lease over", cand.ID(), holder.ID())
	if established.IsZero() || !established.Before(leaseEnd) {
		return
	}
	mustPropose(t, cand, &logpb.ReserveIDs{Count: 5}, "")
	wantNext := cand.State().NextID()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	st, err := holder.LinearizableRead(ctx)
	stale := err == nil && st.NextID() < wantNext
	t.Errorf("trial %d: %s was elected (term %d) while %s still held its lease of term %d (%v left); stale linearizable read on %s: %v",
		trial, cand.ID(), cand.EstablishedTerm(), holder.ID(), holderTerm, leaseEnd.Sub(established), holder.ID(), stale)
}

// TestStaleTimeoutNowDoesNotBreakLease: a TimeoutNow that reaches a member
// which follows a lease holder, without a transfer of that holder's term,
// must not elect it inside the lease. Here the holder is isolated (nothing
// tells it it is deposed) and the target is handed a TimeoutNow naming the
// holder, as a late or replayed message would. On a coordd without the
// transfer check the target is elected within milliseconds and the holder
// serves a stale linearizable read from its lease (3 of 3 trials).
func TestStaleTimeoutNowDoesNotBreakLease(t *testing.T) {
	for trial := 0; trial < 3; trial++ {
		c := newCluster(t, 3, withConfig(withLease))
		x := c.waitLeader()
		xn := c.node(x)
		ci, yi := (x+1)%3, (x+2)%3
		cn := c.node(ci)
		mustPropose(t, xn, &logpb.ReserveIDs{Count: 1}, "") // anchors X's lease
		waitFor(t, opTimeout, func() bool { return cn.Raft().LastIndex() == xn.Raft().LastIndex() }, "target caught up")
		c.isolate(x)
		leaseEnd := xn.LeaseEnd()
		var resp raft.TimeoutNowResponse
		err := c.trans[yi].TimeoutNow(raft.ServerID(c.cfgs[ci].ID), raft.ServerAddress(c.cfgs[ci].RaftAddr),
			&raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax,
				ID: []byte(c.cfgs[x].ID), Addr: []byte(c.cfgs[x].RaftAddr)}}, &resp)
		t.Logf("trial %d: TimeoutNow to %s answered %v", trial, cn.ID(), err)
		checkNoSecondLeaderInLease(t, trial, xn, cn, leaseEnd)
		c.shutdownAll()
	}
}

// TestHeldTimeoutNowIsRefusedInALaterTerm: the real TimeoutNow of a
// transfer in term T, held at its target past a term change (fault
// injection), is refused there, whoever leads the later term, so the
// target is not elected inside that leader's lease. This is the schedule a
// TimeoutNow delayed in the network produces, for any delay.
func TestHeldTimeoutNowIsRefusedInALaterTerm(t *testing.T) {
	for _, tc := range []struct {
		name        string
		senderLeads bool // the sender of the held TimeoutNow leads the later term again
	}{{"another member leads", false}, {"the sender leads again", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, withConfig(withLeaseAndFaults))
			x := c.waitLeader()
			xn := c.node(x)
			ci, yi := (x+1)%3, (x+2)%3
			cn, yn := c.node(ci), c.node(yi)
			mustPropose(t, xn, &logpb.ReserveIDs{Count: 1}, "")
			if err := cn.SetRaftDelay(raftnode.RPCTimeoutNow, raftnode.MaxRaftDelay); err != nil {
				t.Fatal(err)
			}
			if err := xn.TransferLeadership(cn.ID(), cn.RaftAddr()); err == nil {
				t.Fatalf("transfer to %s succeeded although its TimeoutNow is held", cn.ID())
			}
			// Leadership moves on through a transfer that is not held.
			holder := yn
			waitFor(t, opTimeout, func() bool { return xn.TransferLeadership(yn.ID(), yn.RaftAddr()) == nil }, "transfer to %s", yn.ID())
			waitFor(t, opTimeout, func() bool { return yn.IsLeader() && yn.EstablishedTerm() > 0 }, "%s established", yn.ID())
			if tc.senderLeads {
				holder = xn
				waitFor(t, opTimeout, func() bool { return yn.TransferLeadership(xn.ID(), xn.RaftAddr()) == nil }, "transfer back to %s", xn.ID())
				waitFor(t, opTimeout, func() bool { return xn.IsLeader() && xn.EstablishedTerm() > 0 }, "%s established again", xn.ID())
			}
			mustPropose(t, holder, &logpb.ReserveIDs{Count: 1}, "") // a fresh lease
			waitFor(t, opTimeout, func() bool {
				_, lid := cn.Raft().LeaderWithID()
				return string(lid) == holder.ID() && cn.Raft().LastIndex() == holder.Raft().LastIndex()
			}, "%s follows %s and caught up", cn.ID(), holder.ID())
			c.isolate(c.index(holder))
			leaseEnd := holder.LeaseEnd()
			refused := cn.RefusedTimeoutNows()
			if err := cn.SetRaftDelay(raftnode.RPCTimeoutNow, 0); err != nil { // deliver the held TimeoutNow now
				t.Fatal(err)
			}
			checkNoSecondLeaderInLease(t, 0, holder, cn, leaseEnd)
			if cn.RefusedTimeoutNows() == refused {
				t.Errorf("%s did not refuse the TimeoutNow held since the earlier term", cn.ID())
			}
		})
	}
}

// TestTransferAttemptEndsTheLease: after a transfer attempt that did not
// move leadership, the leader serves no lease read for the rest of its
// term, even right after a commit: isolated, it cannot confirm itself.
func TestTransferAttemptEndsTheLease(t *testing.T) {
	c := newCluster(t, 3, withConfig(withLeaseAndFaults))
	x := c.waitLeader()
	xn := c.node(x)
	cn := c.node((x + 1) % 3)
	mustPropose(t, xn, &logpb.ReserveIDs{Count: 1}, "")
	if err := cn.SetRaftDelay(raftnode.RPCTimeoutNow, raftnode.MaxRaftDelay); err != nil {
		t.Fatal(err)
	}
	term := xn.EstablishedTerm()
	if err := xn.TransferLeadership(cn.ID(), cn.RaftAddr()); err == nil {
		t.Fatalf("transfer to %s succeeded although its TimeoutNow is held", cn.ID())
	}
	waitFor(t, opTimeout, func() bool { // would anchor a fresh lease
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := propose(ctx, xn, &logpb.ReserveIDs{Count: 1}, "")
		return err == nil
	}, "a commit after the transfer attempt")
	if got := xn.EstablishedTerm(); got != term {
		t.Fatalf("the leader changed term (%d -> %d); the test needs the transfer to fail in place", term, got)
	}
	c.isolate(x)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := xn.VerifyLeader(ctx); err == nil {
		t.Fatalf("isolated leader of term %d confirmed itself after a transfer attempt in that term", term)
	}
	if _, err := xn.LinearizableRead(ctx); err == nil {
		t.Fatalf("isolated leader of term %d served a linearizable read after a transfer attempt in that term", term)
	}
	if end := xn.LeaseEnd(); !end.IsZero() {
		t.Fatalf("lease of term %d still runs to %v after a transfer attempt", term, time.Until(end))
	}
}

// index is the position of n in the cluster.
func (c *testCluster) index(n *raftnode.Node) int {
	for i := range c.cfgs {
		if c.node(i) == n {
			return i
		}
	}
	c.t.Fatalf("node %s is not running", n.ID())
	return -1
}
