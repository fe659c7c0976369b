// Package nemesis injects faults into a running cluster on a seeded,
// reproducible schedule and records every fault window in a timeline.
//
// The schedule (which faults, in which order, for how long, against which
// role — "the leader", "the k-th follower", a random split) is drawn from
// the seed before the run starts, so the same seed gives the same
// decisions; which process plays which role is resolved when the fault
// starts. Every loop is bounded both in count and in time, and Run always
// heals the cluster before it returns.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coordd/coordd/client"
)

// Window is one fault as it happened.
type Window struct {
	Seq     int    `json:"seq"`
	Kind    Kind   `json:"kind"`
	Targets string `json:"targets"`
	Detail  string `json:"detail,omitempty"`
	Start   int64  `json:"start_ns"`
	End     int64  `json:"end_ns"`
	Error   string `json:"error,omitempty"`
}

// Nemesis runs a schedule against a cluster.
type Nemesis struct {
	c     Cluster
	cfg   Config
	plan  []Step
	admin *client.Client

	mu       sync.Mutex
	windows  []Window
	removed  map[int]bool // members removed from the configuration, not yet re-added
	injected int
}

// New plans the schedule. admin is a client for membership and leadership
// calls.
func New(c Cluster, cfg Config, admin *client.Client) *Nemesis {
	if cfg.MaxFaults <= 0 {
		cfg.MaxFaults = 1000
	}
	if cfg.ElectionTimeout <= 0 {
		cfg.ElectionTimeout = 250 * time.Millisecond
	}
	return &Nemesis{c: c, cfg: cfg, plan: Plan(cfg, c.N()), admin: admin, removed: map[int]bool{}}
}

// Plan is the schedule.
func (n *Nemesis) Plan() []Step { return n.plan }

// Timeline is every fault window so far, in start order.
func (n *Nemesis) Timeline() []Window {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := append([]Window(nil), n.windows...)
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Injected counts faults injected.
func (n *Nemesis) Injected() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.injected
}

func (n *Nemesis) record(w Window) {
	n.mu.Lock()
	n.windows = append(n.windows, w)
	n.injected++
	n.mu.Unlock()
}

// Run executes the schedule until it ends, Duration passes or ctx ends,
// then heals. The fault phase lasts at most Duration plus one hold. It returns the heal error, if any: faults that could not be
// injected are recorded in their windows, not returned.
func (n *Nemesis) Run(ctx context.Context) error {
	deadline := time.Now().Add(n.cfg.Duration)
	for seq, s := range n.plan {
		if ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		if !sleep(ctx, min(s.Quiet, time.Until(deadline))) {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		// The deadline only stops new faults: a started one keeps its
		// planned hold (at most HoldMax, or 3 election timeouts for a
		// pause), so pauses are never cut short of an election.
		n.inject(ctx, seq, s, s.Hold)
	}
	return n.Heal(context.WithoutCancel(ctx))
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// leader finds the leader, waiting at most 5 s; -1 if none.
func (n *Nemesis) leader(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := n.c.Leader(ctx)
	if err != nil {
		return -1
	}
	return l
}

// followers lists the members other than l in ID order.
func (n *Nemesis) followers(l int) []int {
	var out []int
	for i := 0; i < n.c.N(); i++ {
		if i != l && !n.isRemoved(i) {
			out = append(out, i)
		}
	}
	return out
}

func (n *Nemesis) isRemoved(i int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.removed[i]
}

func (n *Nemesis) ids(is []int) string {
	var s []string
	for _, i := range is {
		s = append(s, n.c.ID(i))
	}
	return strings.Join(s, ",")
}

// cut breaks the links from each member of a to each member of b (one
// direction) with blackhole or reset.
func (n *Nemesis) cut(a, b []int, reset bool) {
	for _, i := range a {
		for _, j := range b {
			if i == j {
				continue
			}
			if reset {
				n.c.Link(i, j).Reset()
			} else {
				n.c.Link(i, j).Blackhole()
			}
		}
	}
}

func cutMode(reset bool) string {
	if reset {
		return "reset"
	}
	return "blackhole"
}

// inject runs one fault: inject, hold, heal; and records its window.
func (n *Nemesis) inject(ctx context.Context, seq int, s Step, hold time.Duration) {
	w := Window{Seq: seq, Kind: s.Kind, Start: n.c.Now()}
	var err error
	defer func() {
		w.End = n.c.Now()
		if err != nil {
			w.Error = err.Error()
		}
		n.record(w)
		msg := fmt.Sprintf("nemesis #%d %s [%s] %s for %.2fs", seq, w.Kind, w.Targets, w.Detail, float64(w.End-w.Start)/1e9)
		if err != nil {
			msg += ": " + err.Error()
		}
		n.c.Logf("%s", msg)
	}()
	all := make([]int, n.c.N())
	for i := range all {
		all[i] = i
	}
	switch s.Kind {
	case IsolateLeader:
		l := n.leader(ctx)
		if l < 0 {
			err = errors.New("no leader to isolate")
			return
		}
		w.Targets, w.Detail = n.c.ID(l), cutMode(s.Reset)
		w.Start = n.c.Now()
		others := n.followers(l)
		n.cut([]int{l}, others, s.Reset)
		n.cut(others, []int{l}, s.Reset)
		sleep(ctx, hold)
		n.c.HealNetwork()

	case SplitMajority:
		perm := s.Perm
		minority := perm[:(len(perm)-1)/2]
		if l := n.leader(ctx); l >= 0 && s.TargetLeader && !contains(minority, l) {
			// put the leader on the minority side
			minority = append([]int{l}, minority[:len(minority)-1]...)
		}
		var majority []int
		for _, i := range all {
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

	case OneWay:
		l := n.leader(ctx)
		if l < 0 {
			err = errors.New("no leader")
			return
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

	case Flapping:
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

	case DelayLinks:
		w.Targets, w.Detail = "all links", fmt.Sprintf("%v + up to %v", s.Delay.Round(time.Millisecond), s.Jitter.Round(time.Millisecond))
		w.Start = n.c.Now()
		for _, i := range all {
			for _, j := range all {
				if i != j {
					n.c.Link(i, j).SetDelay(s.Delay, s.Jitter)
				}
			}
		}
		sleep(ctx, hold)
		n.c.HealNetwork()

	case ClientCut:
		// The leader's client link, or those of a random minority
		// (s.Count members: 1, or 2 of 5). Raft links are untouched.
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

	case KillNode, KillLeader, PauseNode:
		victims := n.victims(ctx, s)
		if len(victims) == 0 {
			err = errors.New("no victim")
			return
		}
		w.Targets = n.ids(victims)
		w.Start = n.c.Now()
		if s.Kind == KillNode || s.Kind == KillLeader {
			for _, v := range victims {
				if e := n.c.Kill(v); e != nil {
					err = errors.Join(err, e)
				}
			}
			sleep(ctx, hold)
			for _, v := range victims {
				if e := n.c.Start(v); e != nil {
					err = errors.Join(err, e)
				}
			}
			for _, v := range victims {
				if e := n.c.WaitReady(context.WithoutCancel(ctx), v, 30*time.Second); e != nil {
					err = errors.Join(err, e)
				}
			}
		} else {
			w.Detail = fmt.Sprintf("SIGSTOP for %v (election timeout %v)", hold.Round(time.Millisecond), n.cfg.ElectionTimeout)
			for _, v := range victims {
				if e := n.c.Pause(v); e != nil {
					err = errors.Join(err, e)
				}
			}
			sleep(ctx, hold)
			for _, v := range victims {
				if e := n.c.Resume(v); e != nil {
					err = errors.Join(err, e)
				}
			}
		}

	case Transfer:
		l := n.leader(ctx)
		target := ""
		if fs := n.followers(l); l >= 0 && !s.TargetLeader && len(fs) > 0 {
			target = n.c.ID(fs[s.Follower%len(fs)])
		}
		w.Targets = "any"
		if target != "" {
			w.Targets = target
		}
		if l >= 0 {
			w.Detail = "from " + n.c.ID(l)
		}
		w.Start = n.c.Now()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = n.admin.TransferLeader(cctx, target)
		cancel()

	case RemoveAdd:
		w.Start = n.c.Now()
		var v int
		v, err = n.removeReadd(ctx, s, hold, &w)
		if v >= 0 {
			w.Targets = n.c.ID(v)
		}

	case RestartAll:
		w.Targets = "all"
		w.Start = n.c.Now()
		var wg sync.WaitGroup
		var emu sync.Mutex
		for _, i := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if e := n.c.Kill(i); e != nil {
					emu.Lock()
					err = errors.Join(err, e)
					emu.Unlock()
				}
			}()
		}
		wg.Wait()
		sleep(ctx, hold)
		for _, i := range all {
			if e := n.c.Start(i); e != nil {
				err = errors.Join(err, e)
			}
		}
		for _, i := range all {
			if e := n.c.WaitReady(context.WithoutCancel(ctx), i, 30*time.Second); e != nil {
				err = errors.Join(err, e)
			}
		}
	}
}

// victims picks the members a kill or pause hits: the leader (if the step
// says so) and then followers, s.Count in all.
func (n *Nemesis) victims(ctx context.Context, s Step) []int {
	l := n.leader(ctx)
	var out []int
	if s.TargetLeader && l >= 0 {
		out = append(out, l)
	}
	fs := n.followers(l)
	for k := 0; len(out) < s.Count && k < len(fs); k++ {
		out = append(out, fs[(s.Follower+k)%len(fs)])
	}
	return out
}

// removeReadd removes a follower from the configuration, stops it, adds it
// back and restarts it from its data dir.
func (n *Nemesis) removeReadd(ctx context.Context, s Step, hold time.Duration, w *Window) (int, error) {
	l := n.leader(ctx)
	fs := n.followers(l)
	if l < 0 || len(fs) == 0 {
		return -1, errors.New("no leader or no follower")
	}
	v := fs[s.Follower%len(fs)]
	id := n.c.ID(v)
	n.mu.Lock()
	n.removed[v] = true
	n.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err := n.admin.RemoveMember(cctx, id)
	cancel()
	if err != nil && !client.IsOutcomeUnknown(err) {
		// Not removed: nothing to re-add, but make sure it stays a member.
		n.mu.Lock()
		delete(n.removed, v)
		n.mu.Unlock()
		return v, fmt.Errorf("remove %s: %w", id, err)
	}
	w.Detail = "removed"
	// A removed member shuts its raft down; restart it once re-added.
	if e := n.c.Kill(v); e != nil {
		return v, e
	}
	sleep(ctx, hold)
	if err := n.readd(context.WithoutCancel(ctx), v); err != nil {
		return v, err
	}
	w.Detail = "removed, re-added"
	return v, nil
}

// readd adds member v back as a voter (retrying, bounded) and restarts it.
func (n *Nemesis) readd(ctx context.Context, v int) error {
	id := n.c.ID(v)
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = n.admin.AddVoter(cctx, n.c.Spec(v))
		cancel()
		if err == nil {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("re-add %s: %w", id, err)
	}
	if err := n.c.Start(v); err != nil {
		return err
	}
	if err := n.c.WaitReady(ctx, v, 30*time.Second); err != nil {
		return err
	}
	n.mu.Lock()
	delete(n.removed, v)
	n.mu.Unlock()
	return nil
}

// Heal undoes everything: every raft and client link passes, paused members resume,
// stopped members restart, removed members are re-added, and every member
// is ready. It is bounded in time.
func (n *Nemesis) Heal(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	n.c.HealNetwork()
	var errs []error
	for i := 0; i < n.c.N(); i++ {
		_ = n.c.Resume(i) // an error just means it was not paused
	}
	n.mu.Lock()
	var removed []int
	for v := range n.removed {
		removed = append(removed, v)
	}
	n.mu.Unlock()
	for _, v := range removed {
		_ = n.c.Kill(v)
		if err := n.readd(ctx, v); err != nil {
			errs = append(errs, err)
		}
	}
	for i := 0; i < n.c.N(); i++ {
		_ = n.c.Start(i) // an error just means it runs
	}
	for i := 0; i < n.c.N(); i++ {
		if err := n.c.WaitReady(ctx, i, 60*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
