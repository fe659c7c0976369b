package raftnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/raftnode"
)

// routineEvent is what a leader routine observed when it started or stopped.
type routineEvent struct {
	node        int
	term        uint64 // the term the routine was started for
	established uint64 // node.EstablishedTerm() when the routine started
	leader      bool   // node.IsLeader() when the routine started
	stateTerm   uint64 // the FSM's established term when the routine started
}

// TestLeaderRoutines: a routine registered on every node runs only on the
// established leader, is cancelled when leadership is transferred, and then
// runs on the new leader in its term.
func TestLeaderRoutines(t *testing.T) {
	starts := make(chan routineEvent, 64)
	stops := make(chan routineEvent, 64)
	c := newCluster(t, 3, withSetup(func(i int, n *raftnode.Node) {
		n.AddLeaderRoutine("probe", func(ctx context.Context, term uint64, _ commands.Proposer) {
			ev := routineEvent{node: i, term: term, established: n.EstablishedTerm(), leader: n.IsLeader(),
				stateTerm: n.State().EstablishedTerm()}
			starts <- ev
			<-ctx.Done()
			stops <- ev
		})
	}))

	next := func(ch chan routineEvent, what string) routineEvent {
		t.Helper()
		select {
		case ev := <-ch:
			return ev
		case <-time.After(electTimeout):
			t.Fatalf("timed out waiting for a routine to %s", what)
			return routineEvent{}
		}
	}
	checkStart := func(ev routineEvent) {
		t.Helper()
		if !ev.leader || ev.established != ev.term || ev.term == 0 || ev.stateTerm != ev.term {
			t.Fatalf("routine started on n%d for term %d: leader %v, EstablishedTerm %d, FSM established term %d; "+
				"want an established leader in that term", ev.node, ev.term, ev.leader, ev.established, ev.stateTerm)
		}
	}

	first := next(starts, "start")
	checkStart(first)
	if l := c.waitLeader(); l != first.node {
		t.Fatalf("routine started on n%d but n%d leads", first.node, l)
	}
	if err := transferLeadership(c.node(first.node), nil); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	if stop := next(stops, "stop"); stop != first {
		t.Fatalf("stopped routine %+v, want %+v", stop, first)
	}
	second := next(starts, "start on the new leader")
	checkStart(second)
	if second.node == first.node || second.term <= first.term {
		t.Fatalf("routine restarted on n%d in term %d after leading n%d in term %d; want another node, later term",
			second.node, second.term, first.node, first.term)
	}
	waitFor(t, opTimeout, func() bool { return c.node(first.node).EstablishedTerm() == 0 },
		"n%d to drop its established term", first.node)
	if l := c.waitLeader(); l != second.node {
		t.Fatalf("routine started on n%d but n%d leads", second.node, l)
	}
	// Nothing else ran anywhere: one routine per established leadership.
	select {
	case ev := <-starts:
		t.Fatalf("unexpected routine start %+v", ev)
	case ev := <-stops:
		t.Fatalf("unexpected routine stop %+v", ev)
	default:
	}

	// Shutting the leader down stops its routine too.
	c.stop(second.node)
	if stop := next(stops, "stop on shutdown"); stop != second {
		t.Fatalf("stopped routine %+v, want %+v", stop, second)
	}
	checkStart(next(starts, "start on the third leader"))
}
