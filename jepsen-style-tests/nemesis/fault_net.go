package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// isolateLeader cuts the leader from everyone, both directions.
type isolateLeader struct{}

func (isolateLeader) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	l := n.leader(ctx)
	if l < 0 {
		return errors.New("no leader to isolate")
	}
	w.Targets, w.Detail = n.c.ID(l), cutMode(s.Reset)
	w.Start = n.c.Now()
	others := n.followers(l)
	n.cut([]int{l}, others, s.Reset)
	n.cut(others, []int{l}, s.Reset)
	sleep(ctx, hold)
	n.c.HealNetwork()
	return nil
}

// splitMajority splits the members into a majority and a minority (with the
// leader on the minority side if the step says so).
type splitMajority struct{}

func (splitMajority) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	perm := s.Perm
	minority := perm[:(len(perm)-1)/2]
	if l := n.leader(ctx); l >= 0 && s.TargetLeader && !contains(minority, l) {
		minority = append([]int{l}, minority[:len(minority)-1]...)
	}
	var majority []int
	for _, i := range n.all() {
		if !contains(minority, i) {
			majority = append(majority, i)
		}
	}
	w.Targets = n.ids(minority) + " | " + n.ids(majority)
	w.Detail = cutMode(s.Reset)
	w.Start = n.c.Now()
	n.cut(minority, majority, s.Reset)
	n.cut(majority, minority, s.Reset)
	sleep(ctx, hold)
	n.c.HealNetwork()
	return nil
}

// oneWay cuts one direction only: the leader's outbound links, its inbound
// links, or the link from the leader to one follower.
type oneWay struct{}

func (oneWay) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	l := n.leader(ctx)
	if l < 0 {
		return errors.New("no leader")
	}
	others := n.followers(l)
	w.Start = n.c.Now()
	switch s.Variant {
	case 1:
		w.Targets, w.Detail = n.ids(others)+" -> "+n.c.ID(l), "inbound to leader cut, "+cutMode(s.Reset)
		n.cut(others, []int{l}, s.Reset)
	case 2:
		f := others[s.Follower%len(others)]
		w.Targets, w.Detail = n.c.ID(l)+" -> "+n.c.ID(f), "leader to one follower cut, "+cutMode(s.Reset)
		n.cut([]int{l}, []int{f}, s.Reset)
	default:
		w.Targets, w.Detail = n.c.ID(l)+" -> "+n.ids(others), "outbound from leader cut, "+cutMode(s.Reset)
		n.cut([]int{l}, others, s.Reset)
	}
	sleep(ctx, hold)
	n.c.HealNetwork()
	return nil
}

// flapping toggles a random set of links on and off every period.
type flapping struct{}

func (flapping) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	rng := rand.New(rand.NewPCG(s.SubSeed, 1))
	w.Detail = fmt.Sprintf("period %v", s.Period)
	w.Start = n.c.Now()
	end := time.Now().Add(hold)
	toggles := 0
	for i := 0; i < 1000 && time.Now().Before(end); i++ {
		n.c.HealNetwork()
		if i%2 == 0 {
			// cut a random member from a random subset of the others
			m := rng.IntN(n.c.N())
			for j := 0; j < n.c.N(); j++ {
				if j != m && rng.IntN(2) == 0 {
					n.cut([]int{m}, []int{j}, false)
					n.cut([]int{j}, []int{m}, false)
				}
			}
			toggles++
		}
		if !sleep(ctx, min(s.Period, time.Until(end))) {
			break
		}
	}
	w.Targets = fmt.Sprintf("%d toggles", toggles)
	n.c.HealNetwork()
	return nil
}

// delayLinks slows every raft link by a fixed delay plus jitter.
type delayLinks struct{}

func (delayLinks) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	w.Targets, w.Detail = "all links", fmt.Sprintf("%v + up to %v", s.Delay.Round(time.Millisecond), s.Jitter.Round(time.Millisecond))
	w.Start = n.c.Now()
	all := n.all()
	for _, i := range all {
		for _, j := range all {
			if i != j {
				n.c.Link(i, j).SetDelay(s.Delay, s.Jitter)
			}
		}
	}
	sleep(ctx, hold)
	n.c.HealNetwork()
	return nil
}

// clientCut cuts the leader's client link, or those of a random minority
// (s.Count members: 1, or 2 of 5). Raft links are untouched.
type clientCut struct{}

func (clientCut) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	var victims []int
	if s.TargetLeader {
		if l := n.leader(ctx); l >= 0 {
			victims = []int{l}
			w.Detail = "leader, "
		}
	}
	if len(victims) == 0 {
		victims = append(victims, s.Perm[:min(max(1, s.Count), (n.c.N()-1)/2, len(s.Perm))]...)
		w.Detail = "minority, "
	}
	w.Targets, w.Detail = n.ids(victims), w.Detail+"client links "+cutMode(s.Reset)
	w.Start = n.c.Now()
	for _, v := range victims {
		if s.Reset {
			n.c.ClientLink(v).Reset()
		} else {
			n.c.ClientLink(v).Blackhole()
		}
	}
	sleep(ctx, hold)
	n.c.HealNetwork()
	return nil
}
