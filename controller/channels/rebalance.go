package channels

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordd/coordd/controller/balancer"
	"github.com/coordd/coordd/leadership"
)

// RebalanceWait bounds how long Rebalance waits for the balancer's rounds
// (within the caller's deadline); past it the answer says the round is
// still running.
const RebalanceWait = 10 * time.Second

// errRoundOutlivedWait is the cause of a wait that RebalanceWait (or the
// margin before the caller's deadline) ended.
var errRoundOutlivedWait = errors.New("the rebalance round outlived the wait")

// RebalanceResult is what a requested round did.
type RebalanceResult struct {
	// Report is the round's report; meaningful when RoundDone.
	balancer.Report
	// RoundDone: the rounds finished within the wait. When false, Reason
	// says why there is no report.
	RoundDone bool
}

// Rebalance asks the balancer for a round now
// (docs/semantics.md#pchannel-assignment) and waits for it, up to
// RebalanceWait and a little before ctx's deadline, so the caller hears
// why: the report lists what moved, or why nothing did. A balancer that
// cannot report is only triggered. ctx's error when ctx ends first;
// leadership.ErrNotEstablished when this node does not lead.
func (s *Service) Rebalance(ctx context.Context) (RebalanceResult, error) {
	if s.leader.EstablishedTerm() == 0 {
		return RebalanceResult{}, fmt.Errorf("rebalance: %w", leadership.ErrNotEstablished)
	}
	rr, ok := s.rebalancer.(reportingRebalancer)
	if !ok {
		s.rebalancer.Trigger()
		return RebalanceResult{Report: balancer.Report{Reason: "the round was requested; this member cannot report on it"}}, nil
	}
	wait := RebalanceWait
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d)*9/10)
	}
	// The cause tells which deadline ended the wait: ours (the round still
	// runs) or the caller's, however late this goroutine gets to look.
	wctx, cancel := context.WithTimeoutCause(ctx, wait, errRoundOutlivedWait)
	defer cancel()
	rep, err := rr.Rebalance(wctx)
	if err != nil {
		if !errors.Is(context.Cause(wctx), errRoundOutlivedWait) && ctx.Err() != nil {
			return RebalanceResult{}, ctx.Err()
		}
		return RebalanceResult{Report: balancer.Report{Reason: fmt.Sprintf(
			"the round did not finish within %v; it still runs (watch 'coordctl pchannel list')", wait.Round(time.Millisecond))}}, nil
	}
	return RebalanceResult{Report: rep, RoundDone: true}, nil
}
