package raftnode_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

const testLease = 180 * time.Millisecond // below the 200 ms default heartbeat timeout

func withLease(_ int, cfg *raftnode.Config) { cfg.LeaderLease = testLease }

// TestLeaseAnswersWithoutQuorumRounds: after a commit, and then with no
// writes at all (the renewal barrier keeps it), leadership checks are
// answered from the lease, not by quorum rounds.
func TestLeaseAnswersWithoutQuorumRounds(t *testing.T) {
	c := newCluster(t, 3, withConfig(withLease))
	leader := c.node(c.waitLeader())
	mustPropose(t, leader, &logpb.ReserveIDs{Count: 1}, "")
	rounds0, leased0 := leader.VerifyStats()
	deadline := time.Now().Add(3 * testLease) // past the first lease: only renewals keep it
	calls := 0
	for time.Now().Before(deadline) {
		if err := leader.VerifyLeader(context.Background()); err != nil {
			t.Fatalf("verify leader: %v", err)
		}
		calls++
		time.Sleep(time.Millisecond) // pacing the calls, not waiting for anything
	}
	rounds, leased := leader.VerifyStats()
	if got := leased - leased0; got < uint64(calls)*9/10 {
		t.Fatalf("%d of %d checks answered by the lease (%d quorum rounds), want at least 90 %%", got, calls, rounds-rounds0)
	}
}

// TestLeaseEndsBeforeAnotherLeaderIsEstablished: an isolated leader stops
// confirming its leadership before any other member becomes an established
// leader, and the new leader's lease comes only after. This is the safety
// claim of the lease, checked against hashicorp/raft's real elections.
func TestLeaseEndsBeforeAnotherLeaderIsEstablished(t *testing.T) {
	for trial := 0; trial < 3; trial++ {
		c := newCluster(t, 3, withConfig(withLease))
		old := c.waitLeader()
		oldNode := c.node(old)
		mustPropose(t, oldNode, &logpb.ReserveIDs{Count: 1}, "")
		if err := oldNode.VerifyLeader(context.Background()); err != nil {
			t.Fatalf("verify before isolation: %v", err)
		}
		var lastOK atomic.Int64 // unix nanos at which the last successful check began
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				if oldNode.VerifyLeader(ctx) == nil {
					lastOK.Store(began.UnixNano())
				}
				cancel()
			}
		}()
		isolated := time.Now()
		c.isolate(old)
		// Nothing it submits can commit now; a renewal already in flight
		// fails. What it holds is what it has.
		time.Sleep(20 * time.Millisecond) // let a renewal in flight fail, not a wait for a condition
		leaseEnd := oldNode.LeaseEnd()
		next := c.waitLeader(old)
		established := time.Now()
		close(stop)
		<-done
		// The lease itself, whatever raft's own step-down does meanwhile.
		if !leaseEnd.Before(established) {
			t.Fatalf("trial %d: the isolated leader's lease ran to %v after isolation, past member %d's establishment at %v",
				trial, leaseEnd.Sub(isolated), next, established.Sub(isolated))
		}
		if last := time.Unix(0, lastOK.Load()); !last.Before(established) {
			t.Fatalf("trial %d: the isolated leader confirmed itself at %v, after member %d was established at %v",
				trial, last.Sub(isolated), next, established.Sub(isolated))
		}
		t.Logf("trial %d: last confirmation %v after isolation, new leader established after %v",
			trial, time.Unix(0, lastOK.Load()).Sub(isolated), established.Sub(isolated))
		c.shutdownAll()
	}
}

// TestOpenWaitsOutTheLease: a member with a lease starts raft only a lease
// after it starts, so a lease it upheld before a restart has run out.
func TestOpenWaitsOutTheLease(t *testing.T) {
	start := time.Now()
	newCluster(t, 1, withConfig(withLease))
	if took := time.Since(start); took < testLease {
		t.Fatalf("open took %v, want at least the lease %v", took, testLease)
	}
}
