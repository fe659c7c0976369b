package balancer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer/policy"
)

// Move is one assignment a round committed.
type Move struct {
	PChannel string
	From, To uint64 // From 0: the channel had no healthy owner
	Term     int64
}

// Report is what a manual rebalance answers: what moved, or why nothing
// did and when a move blocked by the minimum rebalance interval becomes
// possible.
type Report struct {
	Moves []Move
	// Reason is why nothing moved ("" when something did).
	Reason string
	// NextMove is when a blocked better placement may be made (zero: no
	// move is blocked).
	NextMove time.Time
}

// Rebalance asks for a round now and waits until the balancer has run
// rounds until one changed nothing (as Run always does), then reports
// every move of those rounds, or why nothing moved. It returns ctx's error
// if that takes longer than ctx allows (the rounds still run).
func (b *Balancer) Rebalance(ctx context.Context) (Report, error) {
	reply := make(chan Report, 1)
	select {
	case b.requests <- reply:
	case <-ctx.Done():
		return Report{}, ctx.Err()
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return Report{}, ctx.Err()
	}
}

// movesOf lists plan's assignments as moves, with each channel's current
// owner read from the plan's layout (0 when it had no healthy one).
func movesOf(plan Plan, committed map[string]int64) []Move {
	from := map[string]uint64{}
	for _, c := range plan.Layout.Channels {
		from[c.Name] = c.Node
	}
	var out []Move
	for _, a := range plan.Assignments {
		term, ok := committed[a.Pchannel]
		if !ok {
			continue
		}
		out = append(out, Move{PChannel: a.Pchannel, From: from[a.Pchannel], To: a.NodeId, Term: term})
	}
	return out
}

// Explain says why a view needs no move: pure in (v, now, cfg), like
// Decide. With rebalancing allowed it asks the policy again without the
// minimum interval: if that would move channels, the interval is what
// blocks them, and next is when the first blocked channel becomes movable.
func Explain(v View, now time.Time, name string, cfg policy.Config, decideErr error) (reason string, next time.Time) {
	if errors.Is(decideErr, policy.ErrNoNodes) {
		return "no healthy streaming node may hold channels (none UP, or none has seen the assignment stream yet)", time.Time{}
	}
	if decideErr != nil {
		return "the round failed: " + decideErr.Error(), time.Time{}
	}
	if len(v.State.PChannels()) == 0 {
		return "there are no pchannels yet", time.Time{}
	}
	if !cfg.AllowRebalance {
		return "rebalancing is off (--allow-rebalance=false): only channels without a healthy owner are placed, and every channel has one", time.Time{}
	}
	free := cfg
	free.MinRebalanceInterval = 0
	p, err := policy.New(name, free)
	if err != nil {
		return "", time.Time{}
	}
	plan, err := Decide(View{State: v.State, Healthy: v.Healthy}, now, p)
	if err != nil || len(plan.Assignments) == 0 {
		return fmt.Sprintf("placement is balanced: no move improves the %s score by more than the tolerance %g", name, cfg.RebalanceTolerance), time.Time{}
	}
	// The channels a free policy would move are blocked by the interval;
	// the first of them to become movable says when to ask again.
	for _, a := range plan.Assignments {
		pc, ok := v.State.PChannel(a.Pchannel)
		if !ok || pc.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
			continue
		}
		at := time.UnixMilli(pc.LastAssignMs).Add(cfg.MinRebalanceInterval)
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return fmt.Sprintf("a better placement exists, but the channels it would move were assigned less than --min-rebalance-interval (%v) ago", cfg.MinRebalanceInterval), next
}
