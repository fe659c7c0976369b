package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

type ackedRange struct {
	requestID   string
	first, size uint64
	result      *logpb.Result
}

// TestFailoverLosesNoAcknowledgedWrite runs concurrent proposers through two
// failovers: first the leader is cut off from the others (its in-flight
// proposals end in "leadership lost"), then, after it has rejoined, the next
// leader crashes (shut down with proposals in flight). Every request is
// retried with its request ID until it is acknowledged; at the end every
// acknowledged range must be in the state, the ranges must tile
// [1, NextID) exactly (an acknowledged write that was lost leaves a hole or
// an overlap, a retry applied twice leaves a hole), and the survivors must
// be byte-identical.
func TestFailoverLosesNoAcknowledgedWrite(t *testing.T) {
	c := newCluster(t, 3)
	first := c.waitLeader()

	const workers = 6
	const perPhase = 120 // acknowledgements between failovers
	var (
		mu       sync.Mutex
		acked    []ackedRange
		ackCount atomic.Int64
		retried  atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; !stop.Load(); seq++ {
				id := fmt.Sprintf("w%d-%d", w, seq)
				count := uint64(1 + (w*7+seq)%5)
				res, attempts, err := c.proposeRetry(ctx, &logpb.ReserveIDs{Count: count}, id)
				if err != nil {
					errc <- err
					return
				}
				r := res.GetIdRange()
				if res.Rejection != nil || r == nil || r.Count != count {
					errc <- fmt.Errorf("%s: unexpected result %v", id, res)
					return
				}
				if attempts > 1 {
					retried.Add(1)
				}
				mu.Lock()
				acked = append(acked, ackedRange{requestID: id, first: r.First, size: r.Count, result: res})
				mu.Unlock()
				ackCount.Add(1)
			}
		}()
	}
	// Workers stop on the first error; make sure the waits below end too.
	waitAcks := func(more int64) {
		t.Helper()
		n := ackCount.Load() + more
		waitFor(t, 20*time.Second, func() bool {
			select {
			case err := <-errc:
				stop.Store(true)
				wg.Wait()
				t.Fatalf("proposer failed: %v", err)
			default:
			}
			return ackCount.Load() >= n
		}, "%d acknowledged proposals", n)
	}

	waitAcks(perPhase)
	c.isolate(first) // partition the leader with proposals in flight
	second := c.waitLeader(first)
	waitAcks(perPhase)
	c.heal(first)
	waitAcks(perPhase)
	c.stop(second) // crash the next leader with proposals in flight
	third := c.waitLeader(second)
	waitAcks(perPhase)
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("proposer failed: %v", err)
	}
	t.Logf("%d acknowledged, %d needed a retry (%d attempts ended with outcome unknown); leaders n%d, n%d, n%d",
		len(acked), retried.Load(), c.unknownOutcomes.Load(), first, second, third)

	survivors := []int{0, 1, 2}
	survivors = slices.DeleteFunc(survivors, func(i int) bool { return i == second })
	final := c.waitConverged(survivors...)

	slices.SortFunc(acked, func(a, b ackedRange) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	next := uint64(1)
	for _, a := range acked {
		if a.first != next {
			t.Fatalf("acknowledged range %s [%d,+%d) does not start at %d: ranges overlap or a range is missing",
				a.requestID, a.first, a.size, next)
		}
		next = a.first + a.size
	}
	for _, i := range survivors {
		st := c.node(i).State()
		if st.NextID() != next {
			t.Errorf("n%d: NextID = %d, want %d (end of the last acknowledged range)", i, st.NextID(), next)
		}
		for _, a := range acked {
			got, ok := st.LookupRequest(a.requestID)
			if !ok || !proto.Equal(got, a.result) {
				t.Fatalf("n%d: request %s recorded as %v (found %v), acknowledged as %v", i, a.requestID, got, ok, a.result)
			}
		}
	}
	if final.NextID() != next {
		t.Fatalf("converged NextID = %d, want %d", final.NextID(), next)
	}
}

// TestPartitionedLeaderCannotCommit isolates the leader: a proposal on it
// must fail (not leader, or outcome unknown) on its own, the majority must
// elect a new leader and commit, and after healing the old leader's
// proposal must not be in anyone's state.
func TestPartitionedLeaderCannotCommit(t *testing.T) {
	c := newCluster(t, 3)
	old := c.waitLeader()
	oldNode := c.node(old)
	mustPropose(t, oldNode, &logpb.ReserveIDs{Count: 3}, "before-partition")

	c.isolate(old)
	lastBefore := oldNode.Raft().LastIndex()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	start := time.Now()
	res, err := propose(ctx, oldNode, &logpb.ReserveIDs{Count: 1000}, "stale-write")
	ctxErr := ctx.Err()
	cancel()
	if err == nil {
		t.Fatalf("propose on a partitioned leader succeeded: %v", res)
	}
	var nle *raftnode.NotLeaderError
	appended := oldNode.Raft().LastIndex() > lastBefore
	switch {
	case appended && (!errors.Is(err, raftnode.ErrOutcomeUnknown) || errors.As(err, &nle)):
		// The entry reached the old leader's log, then leadership was
		// lost: it might have committed, so "nothing done" would be a lie.
		t.Fatalf("propose appended to the partitioned leader's log, then failed with %v; want ErrOutcomeUnknown (never NotLeaderError)", err)
	case !appended && !errors.As(err, &nle) && !errors.Is(err, raftnode.ErrOutcomeUnknown):
		t.Fatalf("propose on a partitioned leader: %v; want NotLeaderError or ErrOutcomeUnknown", err)
	case !appended:
		t.Logf("the leader stepped down before the entry reached raft (%v); the leadership-lost path was not exercised this time", err)
	}
	if ctxErr != nil {
		t.Fatalf("propose on a partitioned leader only failed when the caller's deadline passed (%v): %v", time.Since(start), err)
	}
	t.Logf("partitioned leader n%d refused after %v: %v", old, time.Since(start), err)

	newLeader := c.waitLeader(old)
	mres := mustPropose(t, c.node(newLeader), &logpb.ReserveIDs{Count: 5}, "majority-write")
	first, _ := idRange(t, mres)
	if first != 4 {
		t.Fatalf("majority write got first ID %d, want 4 (right after the 3 IDs before the partition)", first)
	}

	c.heal(old)
	final := c.waitConverged(0, 1, 2)
	for i := 0; i < 3; i++ {
		st := c.node(i).State()
		if got, ok := st.LookupRequest("stale-write"); ok {
			t.Errorf("n%d: the failed proposal of the partitioned leader was applied: %v", i, got)
		}
		if got, ok := st.LookupRequest("majority-write"); !ok || !proto.Equal(got, mres) {
			t.Errorf("n%d: majority write recorded as %v (found %v), acknowledged as %v", i, got, ok, mres)
		}
	}
	if final.NextID() != 9 {
		t.Fatalf("NextID = %d after healing, want 9", final.NextID())
	}
}

// TestLinearizableReadAfterFailover: a write acknowledged by leader A is
// visible through a linearizable read on the next leader B; followers refuse
// with a leader hint; a partitioned A that still believes it leads refuses
// instead of serving its stale state.
//
// A (n0) gets a 5 s leader lease so that it keeps believing it leads for a
// while after the partition, long after B has been elected and has
// committed: only the quorum check of the read can then stop A from serving
// stale data. (Followers stay in contact with A before the partition through
// the replication loop, which sends every CommitTimeout, so A's slow
// heartbeats do not trigger elections.)
func TestLinearizableReadAfterFailover(t *testing.T) {
	const a = 0
	c := newCluster(t, 3, withConfig(func(i int, cfg *raftnode.Config) {
		if i == a {
			cfg.HeartbeatTimeout = 5 * time.Second
			cfg.ElectionTimeout = 5 * time.Second
			cfg.LeaderLeaseTimeout = 5 * time.Second
		}
	}))
	nodeA := c.node(a)
	if l := c.waitLeader(); l != a {
		if err := transferLeadership(c.node(l), nodeA); err != nil {
			t.Fatalf("transfer leadership from n%d to n%d: %v", l, a, err)
		}
		waitFor(t, electTimeout, func() bool { return c.leaderNow() == a }, "n%d to lead", a)
	}
	res := mustPropose(t, nodeA, &logpb.ReserveIDs{Count: 10}, "written-by-A")
	first, count := idRange(t, res)
	if st := linearizableRead(t, nodeA); st.NextID() != first+count {
		t.Fatalf("read on A after its own write: NextID = %d, want %d", st.NextID(), first+count)
	}

	c.isolate(a)
	b := c.waitLeader(a)
	nodeB := c.node(b)
	stB := linearizableRead(t, nodeB)
	if got, ok := stB.LookupRequest("written-by-A"); !ok || !proto.Equal(got, res) {
		t.Fatalf("new leader B: write acknowledged by A recorded as %v (found %v), want %v", got, ok, res)
	}
	if stB.NextID() != first+count {
		t.Fatalf("new leader B: NextID = %d, want %d", stB.NextID(), first+count)
	}
	res2 := mustPropose(t, nodeB, &logpb.ReserveIDs{Count: 5}, "written-by-B")
	first2, count2 := idRange(t, res2)
	if first2 != first+count {
		t.Fatalf("B reserved from %d, want %d", first2, first+count)
	}

	// A still believes it is the established leader and its state lacks B's
	// write; a linearizable read there must fail rather than return it.
	if !nodeA.IsLeader() || nodeA.EstablishedTerm() == 0 {
		t.Fatalf("precondition: partitioned n%d should still believe it leads (leader %v, established term %d)",
			a, nodeA.IsLeader(), nodeA.EstablishedTerm())
	}
	if nodeA.State().NextID() != first+count {
		t.Fatalf("partitioned A applied B's write: NextID %d", nodeA.State().NextID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	st, err := nodeA.LinearizableRead(ctx)
	cancel()
	if err == nil {
		t.Fatalf("linearizable read on deposed, partitioned n%d returned stale state (NextID %d, want %d)",
			a, st.NextID(), first2+count2)
	}
	t.Logf("read on partitioned n%d: %v", a, err)

	// The third node is a follower: it refuses with the leader hint.
	cIdx := 3 - a - b
	nodeC := c.node(cIdx)
	waitFor(t, opTimeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := nodeC.LinearizableRead(ctx)
		if err == nil {
			t.Fatalf("linearizable read on follower n%d succeeded (NextID %d)", cIdx, st.NextID())
		}
		var nle *raftnode.NotLeaderError
		if !errors.As(err, &nle) || !errors.Is(err, raftnode.ErrNotLeader) {
			t.Fatalf("linearizable read on follower n%d: %v; want *NotLeaderError", cIdx, err)
		}
		return nle.LeaderID == nodeB.ID() && nle.LeaderAddr == nodeB.RaftAddr()
	}, "follower n%d to name n%d as leader", cIdx, b)

	c.heal(a)
	final := c.waitConverged(0, 1, 2)
	if final.NextID() != first2+count2 {
		t.Fatalf("after healing NextID = %d, want %d", final.NextID(), first2+count2)
	}
	waitFor(t, opTimeout, func() bool { return !nodeA.IsLeader() && nodeA.EstablishedTerm() == 0 },
		"healed n%d to step down", a)
}
