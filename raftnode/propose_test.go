package raftnode_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/vocab"
)

// TestRequestIDDedupThroughRaft: a request ID proposed again, sequentially,
// concurrently (likely inside one batched entry) or on a later leader,
// returns the first result and reserves IDs only once.
func TestRequestIDDedupThroughRaft(t *testing.T) {
	// slowApply makes the FSM of node slowApply sleep after each entry, so a
	// proposal commits while its proposer has already given up.
	var slowApply atomic.Int32
	slowApply.Store(-1)
	c := newCluster(t, 3, withSetup(func(i int, n *raftnode.Node) {
		n.SetApplyObserver(func(uint64, int) {
			if slowApply.Load() == int32(i) {
				time.Sleep(300 * time.Millisecond)
			}
		})
	}))
	l := c.waitLeader()
	leader := c.node(l)
	start := linearizableRead(t, leader).NextID()

	r1 := mustPropose(t, leader, &logpb.ReserveIDs{Count: 7}, "dup-1")
	r2 := mustPropose(t, leader, &logpb.ReserveIDs{Count: 7}, "dup-1")
	if !proto.Equal(r1, r2) {
		t.Fatalf("repeat of dup-1 returned %v, first returned %v", r2, r1)
	}
	// A request ID means one request: reused with another body it is
	// refused, and nothing is reserved.
	rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
	r3, rerr := propose(rctx, leader, &logpb.ReserveIDs{Count: 100}, "dup-1")
	rcancel()
	if rerr != nil || r3.GetRejection().GetCode() != logpb.RejectCode_REJECT_INVALID {
		t.Fatalf("repeat of dup-1 with another body = %v, %v; want REJECT_INVALID", r3, rerr)
	}
	if first, count := idRange(t, r1); first != start || count != 7 {
		t.Fatalf("dup-1 reserved [%d,+%d), want [%d,+7)", first, count, start)
	}
	if got := linearizableRead(t, leader).NextID(); got != start+7 {
		t.Fatalf("NextID = %d after three proposals of dup-1, want %d", got, start+7)
	}

	// Concurrent repeats.
	const k = 16
	results := make([]*logpb.Result, k)
	var wg sync.WaitGroup
	for j := 0; j < k; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			res, err := propose(ctx, leader, &logpb.ReserveIDs{Count: 3}, "dup-2")
			if err != nil {
				t.Errorf("concurrent dup-2 #%d: %v", j, err)
				return
			}
			results[j] = res
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for j := 1; j < k; j++ {
		if !proto.Equal(results[j], results[0]) {
			t.Fatalf("concurrent dup-2 #%d returned %v, #0 returned %v", j, results[j], results[0])
		}
	}
	if first, _ := idRange(t, results[0]); first != start+7 {
		t.Fatalf("dup-2 reserved from %d, want %d", first, start+7)
	}
	if got := linearizableRead(t, leader).NextID(); got != start+10 {
		t.Fatalf("NextID = %d after %d concurrent proposals of dup-2, want %d", got, k, start+10)
	}

	// A retry after an unknown outcome whose command did commit gets the
	// first result instead of reserving again.
	slowApply.Store(int32(l))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	res, err := propose(ctx, leader, &logpb.ReserveIDs{Count: 4}, "dup-3")
	cancel()
	slowApply.Store(-1)
	if !errors.Is(err, raftnode.ErrOutcomeUnknown) {
		t.Fatalf("proposal outliving its context: %v, %v; want ErrOutcomeUnknown", res, err)
	}
	r5 := mustPropose(t, leader, &logpb.ReserveIDs{Count: 4}, "dup-3")
	if first, _ := idRange(t, r5); first != start+10 {
		t.Fatalf("dup-3 reserved from %d, want %d", first, start+10)
	}
	if got := linearizableRead(t, leader).NextID(); got != start+14 {
		t.Fatalf("NextID = %d after an unknown outcome and a retry of dup-3, want %d", got, start+14)
	}

	// The table is replicated state: a new leader answers the same way.
	if err := transferLeadership(leader, nil); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	nl := c.waitLeader(l)
	if r4 := mustPropose(t, c.node(nl), &logpb.ReserveIDs{Count: 7}, "dup-1"); !proto.Equal(r1, r4) {
		t.Fatalf("dup-1 on new leader n%d returned %v, first returned %v", nl, r4, r1)
	}
	final := c.waitConverged(0, 1, 2)
	if final.NextID() != start+14 {
		t.Fatalf("NextID = %d at the end, want %d", final.NextID(), start+14)
	}
	for i := 0; i < 3; i++ {
		if got, ok := c.node(i).State().LookupRequest("dup-1"); !ok || !proto.Equal(got, r1) {
			t.Fatalf("n%d records dup-1 as %v (found %v), want %v", i, got, ok, r1)
		}
	}
}

// TestProposeRejections: a follower refuses with the leader's identity and
// an invalid command is refused before anything reaches the log.
func TestProposeRejections(t *testing.T) {
	c := newCluster(t, 3)
	l := c.waitLeader()
	leader := c.node(l)
	f := (l + 1) % 3
	follower := c.node(f)
	ctx := context.Background()

	waitFor(t, opTimeout, func() bool {
		_, err := propose(ctx, follower, &logpb.ReserveIDs{Count: 1}, "on-follower")
		var nle *raftnode.NotLeaderError
		if !errors.As(err, &nle) || !errors.Is(err, raftnode.ErrNotLeader) {
			t.Fatalf("propose on follower n%d: %v; want *NotLeaderError", f, err)
		}
		return nle.LeaderID == leader.ID() && nle.LeaderAddr == leader.RaftAddr()
	}, "follower n%d to name n%d as leader", f, l)

	before := linearizableRead(t, leader)
	lastIndex := leader.Raft().LastIndex()
	invalid := []struct {
		name      string
		n         int
		body      proto.Message
		requestID string
	}{
		{"zero count on leader", l, &logpb.ReserveIDs{Count: 0}, "bad-1"},
		{"zero count on follower", f, &logpb.ReserveIDs{Count: 0}, "bad-2"},
		{"count too large", l, &logpb.ReserveIDs{Count: commands.MaxReserveIDs + 1}, "bad-3"},
		{"member without id", l, &logpb.UpsertMember{Member: &logpb.Member{RaftAddr: "127.0.0.1:1"}}, "bad-4"},
		{"request id too long", l, &logpb.ReserveIDs{Count: 1}, strings.Repeat("x", vocab.MaxRequestIDBytes+1)},
	}
	for _, tc := range invalid {
		res, err := propose(ctx, c.node(tc.n), tc.body, tc.requestID)
		if !errors.Is(err, commands.ErrInvalid) {
			t.Errorf("%s: Propose = %v, %v; want an error wrapping commands.ErrInvalid", tc.name, res, err)
		}
	}
	// A command that did not come from commands.New is refused unseen,
	// even a well-formed one: New is the one place that validates.
	for _, body := range []proto.Message{&logpb.ReserveIDs{Count: 0}, &logpb.ReserveIDs{Count: 1}} {
		if res, err := leader.Propose(ctx, commands.MustNew(body)); !errors.Is(err, commands.ErrInvalid) {
			t.Errorf("Propose(MustNew(%v)) = %v, %v; want an error wrapping commands.ErrInvalid", body, res, err)
		}
	}
	if got := leader.Raft().LastIndex(); got != lastIndex {
		t.Fatalf("invalid proposals appended to the log: last index %d -> %d", lastIndex, got)
	}
	after := linearizableRead(t, leader)
	if after.AppliedIndex() != before.AppliedIndex() || after.NextID() != before.NextID() {
		t.Fatalf("state changed: applied %d -> %d, NextID %d -> %d",
			before.AppliedIndex(), after.AppliedIndex(), before.NextID(), after.NextID())
	}
	for _, id := range []string{"on-follower", "bad-1", "bad-2", "bad-3", "bad-4"} {
		if _, ok := after.LookupRequest(id); ok {
			t.Errorf("refused request %s was recorded", id)
		}
	}
}
