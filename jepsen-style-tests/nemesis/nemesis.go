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
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

	mu      sync.Mutex
	windows []Window
	removed map[int]bool // members removed from the configuration, not yet re-added
	// replacing are members whose data dir a storage fault lost or
	// damaged, not yet replaced; violations are what storage faults saw.
	replacing  map[int]bool
	violations []string
	injected   int
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
	return &Nemesis{c: c, cfg: cfg, plan: Plan(cfg, c.N()), admin: admin, removed: map[int]bool{}, replacing: map[int]bool{}}
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

// ready is how long to wait for a member to serve where def is the
// usual wait: def, or Config.ReadyTimeout if that is longer.
func (n *Nemesis) ready(def time.Duration) time.Duration { return max(def, n.cfg.ReadyTimeout) }

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
	f, ok := faults[s.Kind]
	if !ok {
		err = fmt.Errorf("unknown fault kind %q", s.Kind)
		return
	}
	err = f.run(ctx, n, s, hold, &w)
}

// all lists every member index.
func (n *Nemesis) all() []int {
	out := make([]int, n.c.N())
	for i := range out {
		out[i] = i
	}
	return out
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
	if !mayBeRemoved(err) {
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

// mayBeRemoved reports whether a RemoveMember that answered err may have
// removed the member, which must then be re-added: it did (nil), its
// outcome is unknown, or the member is no longer in the configuration
// (NotFound: the nemesis picked it from the configuration, so an attempt
// whose answer was lost removed it, and the client's retry found it
// gone). Taking NotFound for "not removed" left the member out of the
// cluster for good: storage-3-snap-r01 seed 296971638, where the next kill
// then took the quorum of the two members left.
func mayBeRemoved(err error) bool {
	return err == nil || client.IsOutcomeUnknown(err) || status.Code(err) == codes.NotFound
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
	if err := n.c.WaitReady(ctx, v, n.ready(30*time.Second)); err != nil {
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
	// A replacement and every member's readiness fit in the budget.
	ctx, cancel := context.WithTimeout(ctx, max(90*time.Second, 3*n.cfg.ReadyTimeout))
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
	n.mu.Lock()
	var replacing []int
	for v := range n.replacing {
		replacing = append(replacing, v)
	}
	n.mu.Unlock()
	for _, v := range replacing {
		if err := n.replace(ctx, v); err != nil {
			errs = append(errs, err)
		}
	}
	for i := 0; i < n.c.N(); i++ {
		_ = n.c.Start(i) // an error just means it runs
	}
	for i := 0; i < n.c.N(); i++ {
		if err := n.c.WaitReady(ctx, i, n.ready(60*time.Second)); err != nil {
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
