// Package proposertest is the behaviour every commands.Proposer shares:
// the raft node (package raftnode) and the controllers' fake leader
// (controller/controllertest) both run Conformance, so the fake cannot
// read a proposal differently from the real one without a test failing.
package proposertest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// Conformance checks p, an established leader in term (at least 2, so an
// older decision term exists), against the proposal contract of
// commands.Proposer and commands.Prepare:
//   - a plain proposal applies;
//   - a leader routine's decision term in ctx's scope fences a command
//     without a term of its own (Apply refuses an older term as stale);
//   - a command's own decision term wins over the scope's;
//   - commands.OnQueued's function runs exactly once, before Propose
//     returns, and never for a proposal refused before it was queued;
//   - a commands.Chained proposal applies like any other.
func Conformance(t *testing.T, p commands.Proposer, term uint64) {
	t.Helper()
	if term < 2 {
		t.Fatalf("proposertest: the leader's term is %d; Conformance needs one of at least 2", term)
	}
	reserve := func() commands.Command {
		c, err := commands.New(&logpb.ReserveIDs{Count: 1}, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	applied := func(what string, res *logpb.Result, err error) {
		t.Helper()
		if err != nil || res.GetRejection() != nil {
			t.Errorf("%s: result %v, error %v; want it applied", what, res, err)
		}
	}

	res, err := p.Propose(ctx, reserve())
	applied("a plain proposal", res, err)

	old := commands.WithLeaderRoutine(ctx, term-1)
	res, err = p.Propose(old, reserve())
	if err != nil || res.GetRejection().GetCode() != logpb.RejectCode_REJECT_STALE {
		t.Errorf("a proposal in the scope of a routine of term %d after term %d was established: result %v, error %v; "+
			"want REJECT_STALE (the Proposer did not read the scope's decision term)", term-1, term, res, err)
	}
	res, err = p.Propose(old, reserve().DecidedIn(term))
	applied("a command decided in the current term, in an older routine's scope", res, err)

	var calls atomic.Int32
	res, err = p.Propose(ctx, reserve(), commands.OnQueued(func() { calls.Add(1) }))
	applied("a proposal with OnQueued", res, err)
	if n := calls.Load(); n != 1 {
		t.Errorf("OnQueued's function ran %d times by the time Propose returned, want once", n)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Propose(ended, reserve(), commands.OnQueued(func() {
		t.Error("OnQueued's function ran for a proposal whose context had ended before it was queued")
	})); err == nil {
		t.Error("a proposal with an ended context succeeded")
	}

	res, err = p.Propose(ctx, reserve(), commands.Chained())
	applied("a chained proposal", res, err)
}
