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
			retryTrials(t, func(c *testCluster) bool {
				x := c.waitLeader()
				xn := c.node(x)
				cn, yn := c.node((x+1)%3), c.node((x+2)%3)
				mustPropose(t, xn, &logpb.ReserveIDs{Count: 1}, "")
				if err := cn.SetRaftDelay(raftnode.RPCTimeoutNow, raftnode.MaxRaftDelay); err != nil {
					t.Fatal(err)
				}
				if err := xn.TransferLeadership(cn.ID(), cn.RaftAddr()); err == nil {
					t.Fatalf("transfer to %s succeeded although its TimeoutNow is held", cn.ID())
				}
				// Leadership moves on through transfers that are not held.
				holder := yn
				if !c.moveLeadership(yn, cn) {
					return false
				}
				if tc.senderLeads {
					holder = xn
					if !c.moveLeadership(xn, cn) {
						return false
					}
				}
				mustPropose(t, holder, &logpb.ReserveIDs{Count: 1}, "") // a fresh lease
				waitFor(t, opTimeout, func() bool {
					_, lid := cn.Raft().LeaderWithID()
					return string(lid) == holder.ID() && cn.Raft().LastIndex() >= holder.Raft().LastIndex() || !holder.IsLeader()
				}, "%s follows %s and caught up", cn.ID(), holder.ID())
				if !holder.IsLeader() || cn.IsLeader() {
					return false // an election under load: not this schedule
				}
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
				return true
			})
		})
	}
}

// retryTrials runs trial on fresh 3-member clusters (lease and fault
// injection on) until one returns true, meaning its schedule happened: on
// a loaded machine an unplanned election can spoil one. It fails the test
// after 4 spoiled trials.
func retryTrials(t *testing.T, trial func(c *testCluster) bool) {
	t.Helper()
	for attempt := 0; attempt < 4; attempt++ {
		c := newCluster(t, 3, withConfig(withLeaseAndFaults))
		ok := trial(c)
		c.shutdownAll()
		if ok || t.Failed() {
			return
		}
		t.Logf("trial %d: an unplanned election spoiled the schedule; again", attempt)
	}
	t.Fatal("4 trials in a row were spoiled by unplanned elections")
}

// moveLeadership transfers leadership to member to (from whoever leads),
// until it is an established leader; false if avoid (when not nil) leads
// first or it does not happen in time.
func (c *testCluster) moveLeadership(to, avoid *raftnode.Node) bool {
	deadline := time.Now().Add(opTimeout)
	for time.Now().Before(deadline) {
		if avoid != nil && avoid.IsLeader() {
			return false
		}
		if to.IsLeader() && to.EstablishedTerm() > 0 {
			return true
		}
		if l := c.leaderNow(); l >= 0 && c.node(l) != to {
			_ = c.node(l).TransferLeadership(to.ID(), to.RaftAddr())
		}
		waitFor(c.t, opTimeout, func() bool { return to.IsLeader() || c.leaderNow() >= 0 }, "a leader")
	}
	return false
}

// TestTransferAttemptEndsTheLease: after a transfer attempt that did not
// move leadership, the leader serves no lease read for the rest of its
// term, even right after a commit: isolated, it cannot confirm itself.
func TestTransferAttemptEndsTheLease(t *testing.T) {
	retryTrials(t, func(c *testCluster) bool {
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
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		for { // would anchor a fresh lease
			if xn.EstablishedTerm() != term {
				return false // an election under load: the transfer did not fail in place
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			_, err := propose(pctx, xn, &logpb.ReserveIDs{Count: 1}, "")
			pcancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("no commit after the transfer attempt: %v", err)
			}
		}
		if xn.EstablishedTerm() != term {
			return false
		}
		c.isolate(x)
		vctx, vcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer vcancel()
		if err := xn.VerifyLeader(vctx); err == nil {
			t.Errorf("isolated leader of term %d confirmed itself after a transfer attempt in that term", term)
		}
		if _, err := xn.LinearizableRead(vctx); err == nil {
			t.Errorf("isolated leader of term %d served a linearizable read after a transfer attempt in that term", term)
		}
		if end := xn.LeaseEnd(); !end.IsZero() {
			t.Errorf("lease of term %d still runs to %v after a transfer attempt", term, time.Until(end))
		}
		return true
	})
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
