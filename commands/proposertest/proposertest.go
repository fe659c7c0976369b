// Package proposertest is the behaviour every commands.Proposer shares:
// the raft node (package raftnode) and the controllers' fake leader
// (controller/controllertest) both run Conformance, so the fake cannot
// read a proposal differently from the real one without a test failing.
package proposertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Subject is a Proposer under test and how to drive it.
type Subject struct {
	// P is an established leader in Term, at least 2 (so an older
	// decision term exists).
	P    commands.Proposer
	Term uint64
	// Saturate fills P's proposal queue: once it returns, P refuses a
	// client's proposal as overloaded (an error of vocab.ClassExhausted,
	// nothing done) until release is called, which lets everything
	// admitted meanwhile go on and returns once it has.
	Saturate func(t *testing.T) (release func())
}

// waitLimit bounds every wait of Conformance for the subject.
const waitLimit = 30 * time.Second

// Conformance checks s against the proposal contract of commands.Proposer
// and commands.Prepare; each of its options must have its effect:
//   - a plain proposal applies;
//   - commands.DecisionTerm, and a commands.Fenced proposer, stamp a command
//     without a term of its own, so Apply refuses an older term as stale
//     and accepts the current one; a command's own decision term wins;
//   - commands.CallerNode stamps the caller's node identity, so Apply
//     refuses it for a session bound to another identity and accepts it
//     for the session's own;
//   - commands.OnQueued's function runs exactly once, before Propose
//     returns, and never for a proposal refused before it was queued;
//   - a commands.Chained proposal applies like any other;
//   - with the queue full a client's proposal is refused as overloaded
//     and never queued, and a commands.AsRoutine proposal is queued at
//     once and applies when the queue moves again.
func Conformance(t *testing.T, s Subject) {
	t.Helper()
	p, term := s.P, s.Term
	if term < 2 {
		t.Fatalf("proposertest: the leader's term is %d; Conformance needs one of at least 2", term)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	build := func(body *logpb.ReserveIDs) commands.Command {
		c, err := commands.New(body, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	reserve := func() commands.Command { return build(&logpb.ReserveIDs{Count: 1}) }
	applied := func(what string, res *logpb.Result, err error) {
		t.Helper()
		if err != nil || res.GetRejection() != nil {
			t.Errorf("%s: result %v, error %v; want it applied", what, res, err)
		}
	}
	refused := func(what string, code logpb.RejectCode, res *logpb.Result, err error) {
		t.Helper()
		if err != nil || res.GetRejection().GetCode() != code {
			t.Errorf("%s: result %v, error %v; want %v (the Proposer did not stamp the option)", what, res, err, code)
		}
	}

	res, err := p.Propose(ctx, reserve())
	applied("a plain proposal", res, err)

	decisionTerms(ctx, p, term, reserve, applied, refused)
	callerNode(ctx, t, p, applied, refused)

	var calls atomic.Int32
	res, err = p.Propose(ctx, reserve(), commands.OnQueued(func() { calls.Add(1) }))
	applied("a proposal with OnQueued", res, err)
	if n := calls.Load(); n != 1 {
		t.Errorf("OnQueued's function ran %d times by the time Propose returned, want once", n)
	}
	ended, cancelEnded := context.WithCancel(ctx)
	cancelEnded()
	if _, err := p.Propose(ended, reserve(), commands.OnQueued(func() {
		t.Error("OnQueued's function ran for a proposal whose context had ended before it was queued")
	})); err == nil {
		t.Error("a proposal with an ended context succeeded")
	}

	res, err = p.Propose(ctx, reserve(), commands.Chained())
	applied("a chained proposal", res, err)

	routineWaits(ctx, t, s, reserve, applied)
}

type (
	appliedFunc func(what string, res *logpb.Result, err error)
	refusedFunc func(what string, code logpb.RejectCode, res *logpb.Result, err error)
)

// decisionTerms: DecisionTerm and Fenced stamp the decision term, and
// Apply fences it; a command's own term wins.
func decisionTerms(ctx context.Context, p commands.Proposer, term uint64, reserve func() commands.Command, applied appliedFunc, refused refusedFunc) {
	res, err := p.Propose(ctx, reserve(), commands.DecisionTerm(term-1))
	refused("a proposal decided in an older term (DecisionTerm)", logpb.RejectCode_REJECT_STALE, res, err)
	res, err = commands.Fenced(p, term-1).Propose(ctx, reserve())
	refused("a proposal of a proposer fenced by an older term", logpb.RejectCode_REJECT_STALE, res, err)
	res, err = p.Propose(ctx, reserve(), commands.DecisionTerm(term))
	applied("a proposal decided in the current term", res, err)
	res, err = commands.Fenced(p, term-1).Propose(ctx, reserve().DecidedIn(term))
	applied("a command decided in the current term, through a proposer fenced by an older one", res, err)
	res, err = p.Propose(ctx, reserve().DecidedIn(term-1), commands.DecisionTerm(term))
	refused("a command decided in an older term, proposed with the current one", logpb.RejectCode_REJECT_STALE, res, err)
}

// callerNode: CallerNode stamps the caller's identity, which Apply checks
// against the session's binding (a drain speaks for a session).
func callerNode(ctx context.Context, t *testing.T, p commands.Proposer, applied appliedFunc, refused refusedFunc) {
	t.Helper()
	const identity = 7
	res, err := commands.Propose(ctx, p, &logpb.RegisterStreamingNode{Address: "10.9.9.9:1", Incarnation: "proposertest", BoundNode: identity}, "")
	applied("a registration bound to a node identity", res, err)
	node := res.GetRegisterNode().GetNodeId()
	if node == 0 {
		t.Errorf("the registration answered %v, no node id", res)
		return
	}
	drain := func() commands.Command {
		c, err := commands.New(&logpb.SetStreamingNodeDrain{NodeId: node, Draining: true, Reason: "proposertest"}, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	res, err = p.Propose(ctx, drain(), commands.CallerNode(identity+1))
	refused("a drain stamped with another node identity than the session's", logpb.RejectCode_REJECT_PERMISSION, res, err)
	res, err = commands.With(p, commands.CallerNode(identity+1)).Propose(ctx, drain())
	refused("a drain through a proposer that stamps another node identity", logpb.RejectCode_REJECT_PERMISSION, res, err)
	res, err = p.Propose(ctx, drain(), commands.CallerNode(identity))
	applied("a drain stamped with the session's node identity", res, err)
}

// routineWaits: with the queue full, a client's proposal is refused
// unqueued and a routine's is queued and applies once the queue moves.
func routineWaits(ctx context.Context, t *testing.T, s Subject, reserve func() commands.Command, applied appliedFunc) {
	t.Helper()
	release := s.Saturate(t)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	_, err := s.P.Propose(ctx, reserve(), commands.OnQueued(func() {
		t.Error("a client's proposal into a full queue was queued")
	}))
	if vocab.ClassOf(err) != vocab.ClassExhausted {
		t.Errorf("a client's proposal into a full queue: %v; want an overloaded refusal (%v)", err, vocab.ClassExhausted)
	}

	type outcome struct {
		res *logpb.Result
		err error
	}
	queued, done := make(chan struct{}), make(chan outcome, 1)
	go func() {
		res, err := s.P.Propose(ctx, reserve(), commands.AsRoutine(), commands.OnQueued(func() { close(queued) }))
		done <- outcome{res, err}
	}()
	select {
	case <-queued:
	case o := <-done:
		t.Errorf("a routine's proposal into a full queue returned before it was queued: result %v, error %v; want it to wait", o.res, o.err)
		return
	case <-ctx.Done():
		t.Errorf("a routine's proposal into a full queue was not queued in %v", waitLimit)
		return
	}
	release()
	released = true
	select {
	case o := <-done:
		applied("a routine's proposal queued into a full queue", o.res, o.err)
	case <-ctx.Done():
		t.Errorf("a routine's proposal did not return in %v after the queue moved", waitLimit)
	}
}
