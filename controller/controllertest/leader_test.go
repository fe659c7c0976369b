package controllertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/testutil"
)

func TestLeaderAppliesThroughTheFSM(t *testing.T) {
	clock := NewClock()
	l := NewLeader(t, clock, 3)
	if l.EstablishedTerm() != 3 || l.State().EstablishedTerm() != 3 {
		t.Fatalf("established %d, FSM leader term %d, want 3", l.EstablishedTerm(), l.State().EstablishedTerm())
	}
	changed := l.StateChanged()
	clock.Advance(time.Second)
	res := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "10.0.0.1:1", Incarnation: "a"})
	select {
	case <-changed:
	default:
		t.Fatal("StateChanged not closed by an applied proposal")
	}
	n, ok := l.State().StreamingNode(res.GetRegisterNode().GetNodeId())
	if !ok || n.Address != "10.0.0.1:1" {
		t.Fatalf("registered node %v %v", n, ok)
	}
	if got := AppliedOf[*logpb.RegisterStreamingNode](l); len(got) != 1 {
		t.Fatalf("applied registrations %v", got)
	}
	// A shape error never reaches the FSM.
	if _, err := commands.Propose(context.Background(), l, &logpb.RegisterStreamingNode{}, ""); err == nil {
		t.Fatal("an invalid body was accepted")
	}
	// A stale term is rejected by the FSM's guard, as from a deposed leader.
	l.Establish(t, 5)
	l.SetRaftTerm(3)
	res, err := commands.Propose(context.Background(), l, &logpb.ReserveIDs{Count: 1}, "")
	if err != nil || res.Rejection == nil {
		t.Fatalf("stale-term proposal: %v %v, want a rejection", res, err)
	}
	// A decision term of a fenced proposer wins over the fake's raft term.
	l.SetRaftTerm(5)
	res, err = commands.Propose(context.Background(), commands.Fenced(l, 3), &logpb.ReserveIDs{Count: 1}, "")
	if err != nil || res.Rejection == nil {
		t.Fatalf("proposal decided in term 3 after term 5 established: %v %v, want a rejection", res, err)
	}
	terms := l.DecisionTerms()
	if terms[len(terms)-1] != 3 || terms[0] != 0 {
		t.Fatalf("decision terms %v: want 0 first, 3 last", terms)
	}
	// A command not built by commands.New is refused.
	if _, err := l.Propose(context.Background(), commands.MustNew(&logpb.ReserveIDs{Count: 1})); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("unchecked command: %v", err)
	}
}

func TestLeaderHooksAndRefusal(t *testing.T) {
	l := NewLeader(t, NewClock(), 1)
	ctx := context.Background()
	body := &logpb.ReserveIDs{Count: 1}

	l.SetRefuse(true)
	if _, err := commands.Propose(ctx, l, body, ""); !errors.Is(err, ErrNotLeader) || !errors.Is(err, leadership.ErrNotLeader) {
		t.Fatalf("refusing leader: %v, want leadership.ErrNotLeader", err)
	}
	l.SetRefuse(false)

	boom := errors.New("boom")
	l.SetBeforePropose(func(proto.Message) error { return boom })
	if _, err := commands.Propose(ctx, l, body, ""); !errors.Is(err, boom) {
		t.Fatalf("before hook error: %v", err)
	}
	l.SetBeforePropose(nil)

	var calls atomic.Int32
	l.SetBeforeNextApply(func(b proto.Message) bool {
		calls.Add(1)
		_, ok := b.(*logpb.ReserveIDs)
		return ok
	})
	l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "10.0.0.1:1", Incarnation: "a"}) // not its body
	l.MustPropose(t, body)                                                                  // its body: cleared
	l.MustPropose(t, body)
	if calls.Load() != 2 {
		t.Fatalf("once hook ran %d times, want 2", calls.Load())
	}

	before := len(l.Applied())
	l.SetAfterApply(func(proto.Message) error { return boom })
	if _, err := commands.Propose(ctx, l, body, ""); !errors.Is(err, boom) {
		t.Fatalf("after hook error: %v", err)
	}
	if len(l.Applied()) != before+1 {
		t.Fatal("an outcome-unknown proposal was not applied")
	}

	l.SetVerifyError(boom)
	if err := l.VerifyLeader(ctx); !errors.Is(err, boom) {
		t.Fatalf("VerifyLeader: %v", err)
	}
}

func TestClockHelpers(t *testing.T) {
	clock := NewClock()
	if !clock.Now().Equal(Epoch) {
		t.Fatalf("fake clock starts at %v, want %v", clock.Now(), Epoch)
	}
	timer := clock.NewTimer(time.Minute)
	WaitForTimers(t, clock, 1)
	AdvanceUntil(t, clock, 10*time.Second, "the timer", func() bool {
		select {
		case <-timer.Chan():
			return true
		default:
			return false
		}
	})
	if d := clock.Since(Epoch); d < time.Minute || d > time.Minute+10*time.Second {
		t.Fatalf("advanced %v to fire a one-minute timer in 10s steps", d)
	}
}

// TestNewLeaderBoundsTheTest: a test that builds a fake leader has its own
// deadline, so a controller that wedges fails it fast.
func TestNewLeaderBoundsTheTest(t *testing.T) {
	start := time.Now()
	l := NewLeader(t, NewClock(), 1)
	d, ok := l.Deadline().Deadline()
	if !ok {
		t.Fatal("NewLeader armed no deadline")
	}
	if limit := testutil.Timeout(TestDeadline); d.Before(start) || d.After(time.Now().Add(limit)) {
		t.Fatalf("deadline %v, want within %v of the start %v", d, limit, start)
	}
}
