package allocator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
)

// Hybrid timestamp layout: physical milliseconds << LogicalBits | logical.
const (
	LogicalBits = 18
	maxLogical  = 1 << LogicalBits
)

// errNotLeader is returned when this node does not lead an established
// term; it is leadership.ErrNotLeader.
var errNotLeader = fmt.Errorf("allocator: %w", leadership.ErrNotLeader)

// ComposeTS builds a hybrid timestamp.
func ComposeTS(physicalMs, logical int64) uint64 {
	return uint64(physicalMs)<<LogicalBits | uint64(logical)
}

// ParseTS splits a hybrid timestamp.
func ParseTS(ts uint64) (physicalMs, logical int64) {
	return int64(ts >> LogicalBits), int64(ts & (maxLogical - 1))
}

// TSOConfig tunes the timestamp window.
type TSOConfig struct {
	// Window is how far past the current physical time the committed limit
	// is set; default 3 s.
	Window time.Duration
	// RefreshBefore: the leader routine extends the window once less than
	// this is left; default 1 s.
	RefreshBefore time.Duration
	// MaxLead bounds how far the physical part may run ahead of the clock
	// when the logical space of a millisecond is used up: a caller then
	// waits for the clock instead of pushing time into the future. Default
	// twice the window, so the lead a failover inherits (at most one
	// window) leaves room for bursts.
	MaxLead time.Duration
	// Clock reads the time and runs the refresh ticker; default the real
	// clock. Tests pass a fake and advance it.
	Clock clockwork.Clock
}

// TSO is the timestamp oracle.
//
// Callers take timestamps from the current window with a compare-and-swap
// on its position, without the lock (W1's alloc-ts variants in
// bench/RESULTS.md: 64 callers at once); a take that needs more than that
// (a new term, the logical space of a millisecond used up, the committed
// limit reached) goes through takeSlow under mu, which moves the position
// with the same compare-and-swap, so both kinds of take are ordered by it
// and every timestamp is handed out once, above every earlier one.
type TSO struct {
	leader Leader
	cfg    TSOConfig

	// win is the window of term (nil: none; then takes go through
	// takeSlow). Replaced only under mu.
	win atomic.Pointer[tsoWindow]

	mu   sync.Mutex
	term uint64 // term the window belongs to; 0 = none
	// refreshing is closed when Refresh's extension (proposed without
	// the lock, so callers go on serving from the window meanwhile)
	// ends; nil when none is running.
	refreshing chan struct{}
}

// tsoWindow is one term's timestamp position and committed limit.
type tsoWindow struct {
	term uint64
	// pos is the next timestamp's physical ms and logical value, packed by
	// packPos; moved only by compare-and-swap.
	pos atomic.Uint64
	// limit is the committed limit (exclusive, physical ms); raised only
	// under mu, after the commit.
	limit atomic.Int64
}

// posLogicalBits holds a logical value up to maxLogical itself (a
// millisecond used up exactly).
const posLogicalBits = LogicalBits + 2

func packPos(physical, logical int64) uint64 {
	return uint64(physical)<<posLogicalBits | uint64(logical)
}

func unpackPos(p uint64) (physical, logical int64) {
	return int64(p >> posLogicalBits), int64(p & (1<<posLogicalBits - 1))
}

// position is the window's physical and logical parts (zeros for nil).
func (w *tsoWindow) position() (physical, logical int64) {
	if w == nil {
		return 0, 0
	}
	return unpackPos(w.pos.Load())
}

// tryTake takes count timestamps at now without the lock, or reports
// false when the call needs takeSlow: the millisecond's logical space
// does not hold them, or the position reached the committed limit.
func (w *tsoWindow) tryTake(now, count int64) (uint64, bool) {
	for {
		cur := w.pos.Load()
		physical, logical := unpackPos(cur)
		if now > physical {
			physical, logical = now, 0
		}
		if logical+count > maxLogical || physical >= w.limit.Load() {
			return 0, false
		}
		if w.pos.CompareAndSwap(cur, packPos(physical, logical+count)) {
			return ComposeTS(physical, logical), true
		}
	}
}

// NewTSO returns a TSO that serves while leader leads.
func NewTSO(leader Leader, cfg TSOConfig) *TSO {
	if cfg.Window <= 0 {
		cfg.Window = 3 * time.Second
	}
	if cfg.RefreshBefore <= 0 || cfg.RefreshBefore >= cfg.Window {
		cfg.RefreshBefore = cfg.Window / 3
	}
	if cfg.MaxLead <= 0 {
		cfg.MaxLead = 2 * cfg.Window
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return &TSO{leader: leader, cfg: cfg}
}

// Alloc returns the first of count consecutive timestamps.
func (t *TSO) Alloc(ctx context.Context, count uint32) (uint64, error) {
	return t.AllocVia(ctx, count, t.leader)
}

// AllocVia is Alloc proposing a window extension the call needs through
// p, as a decision of the current term: a leader routine passes its
// proposer, so the extension waits for room in a full proposal queue as
// the routine's own proposals do.
func (t *TSO) AllocVia(ctx context.Context, count uint32, p commands.Proposer) (uint64, error) {
	if count == 0 || count >= maxLogical {
		return 0, fmt.Errorf("timestamp count must be in 1..%d, got %d", maxLogical-1, count)
	}
	term := t.leader.EstablishedTerm()
	if term == 0 {
		return 0, errNotLeader
	}
	first, err := t.take(ctx, p, term, int64(count))
	if err != nil {
		return 0, err
	}
	if err := t.leader.VerifyLeader(ctx); err != nil {
		return 0, err
	}
	if t.leader.EstablishedTerm() != term {
		return 0, errNotLeader
	}
	return first, nil
}

// take hands out count logical values: lock-free from the term's window
// when it holds them, else through takeSlow.
func (t *TSO) take(ctx context.Context, p commands.Proposer, term uint64, count int64) (uint64, error) {
	if w := t.win.Load(); w != nil && w.term == term {
		if first, ok := w.tryTake(t.cfg.Clock.Now().UnixMilli(), count); ok {
			return first, nil
		}
	}
	return t.takeSlow(ctx, p, term, count)
}

// takeSlow takes count logical values under the lock, opening the term's
// window, moving to the next millisecond, or extending the committed
// window first when it must, proposing through p.
func (t *TSO) takeSlow(ctx context.Context, p commands.Proposer, term uint64, count int64) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The window is extended for this term's decisions only.
	decider := commands.Fenced(p, term)
	for {
		if t.term != term {
			if err := t.resetLocked(ctx, decider, term); err != nil {
				return 0, err
			}
		}
		w := t.win.Load()
		now := t.cfg.Clock.Now().UnixMilli()
		cur := w.pos.Load()
		physical, logical := unpackPos(cur)
		if now > physical {
			physical, logical = now, 0
		}
		if logical+count > maxLogical {
			// The millisecond is used up. Move to the next one only while
			// that stays within MaxLead of the clock; otherwise wait for
			// the clock. Holding the lock makes every caller that needs it
			// wait: that is the rate limit.
			next := physical + 1
			if wait := time.Duration(next-now)*time.Millisecond - t.cfg.MaxLead; wait > 0 {
				select {
				case <-t.cfg.Clock.After(wait):
				case <-ctx.Done():
					return 0, fmt.Errorf("timestamp oracle is %v ahead of the clock; waiting for it: %w",
						time.Duration(physical-now)*time.Millisecond, ctx.Err())
				}
				if t.term != term {
					return 0, errNotLeader
				}
				now = t.cfg.Clock.Now().UnixMilli()
			}
			physical, logical = max(next, now), 0
		}
		if physical >= w.limit.Load() && t.refreshing != nil {
			// Refresh is extending the window: wait for it rather than race
			// it with a lower limit that Apply would reject.
			ch := t.refreshing
			t.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				t.mu.Lock()
				return 0, fmt.Errorf("extend tso window: %w", ctx.Err())
			}
			t.mu.Lock()
			if t.term != term {
				return 0, errNotLeader
			}
			continue // take again from where the window is now
		}
		if physical >= w.limit.Load() {
			if err := t.extendLocked(ctx, decider, max(physical, now)); err != nil {
				return 0, err
			}
		}
		if !w.pos.CompareAndSwap(cur, packPos(physical, logical+count)) {
			continue // a lock-free take moved the position: take again
		}
		return ComposeTS(physical, logical), nil
	}
}

// resetLocked starts a window for a newly established term, strictly above
// everything earlier leaders could have handed out; decider proposes the
// term's decisions (commands.Fenced).
func (t *TSO) resetLocked(ctx context.Context, decider commands.Proposer, term uint64) error {
	t.dropLocked()
	committed := t.leader.State().TSOLimitPhysicalMs()
	start := max(t.cfg.Clock.Now().UnixMilli(), committed)
	w := &tsoWindow{term: term}
	w.pos.Store(packPos(start, 0))
	w.limit.Store(committed)
	t.win.Store(w)
	if err := t.extendLocked(ctx, decider, start); err != nil {
		return err
	}
	t.term = term
	return nil
}

// dropLocked closes the window: no take, with or without the lock, uses it
// again, and the next one re-reads the committed limit (resetLocked).
func (t *TSO) dropLocked() {
	t.term = 0
	t.win.Store(nil)
}

// extendLocked commits a limit above from and adopts it: a window past the
// clock, or just past from when from is already further ahead. Measuring
// the window from the clock, not from from, keeps the limit a new leader
// inherits (and starts at) within one window of the clock, so failovers do
// not ratchet the oracle into the future. decider proposes it as a
// decision of the window's term (commands.Fenced).
func (t *TSO) extendLocked(ctx context.Context, decider commands.Proposer, from int64) error {
	w := t.win.Load()
	want := max(t.cfg.Clock.Now().UnixMilli()+t.cfg.Window.Milliseconds(), from+1)
	if want <= w.limit.Load() {
		return nil // the committed limit already covers it
	}
	if _, err := commands.CommitNew(ctx, decider, &logpb.ExtendTSOWindow{LimitPhysicalMs: want}, ""); err != nil {
		// On a refusal someone (a previous window of ours) already
		// committed a higher limit; re-read it rather than trust our copy.
		t.dropLocked()
		return fmt.Errorf("extend tso window to %d: %w", want, err)
	}
	w.limit.Store(want)
	return nil
}

// Refresh extends the window ahead of need so Alloc rarely waits on raft.
// The leader routine calls it periodically. The extension is proposed
// without holding the allocator's lock: callers keep taking timestamps
// below the current limit while it commits, and only one that reaches
// the limit waits for it.
func (t *TSO) Refresh(ctx context.Context, term uint64) error {
	return t.refresh(ctx, term, t.leader)
}

// refresh is Refresh proposing through p (the leader routine's proposer,
// or the leader), as decisions of term.
func (t *TSO) refresh(ctx context.Context, term uint64, p commands.Proposer) error {
	decider := commands.Fenced(p, term)
	t.mu.Lock()
	if t.term != term {
		defer t.mu.Unlock()
		return t.resetLocked(ctx, decider, term)
	}
	now := t.cfg.Clock.Now().UnixMilli()
	w := t.win.Load()
	physical, _ := w.position()
	if t.refreshing != nil || w.limit.Load()-max(now, physical) > t.cfg.RefreshBefore.Milliseconds() {
		t.mu.Unlock()
		return nil
	}
	want := max(now+t.cfg.Window.Milliseconds(), max(now, physical)+1)
	if want <= w.limit.Load() {
		// Running ahead of the clock (up to MaxLead) can leave the limit
		// above this want: there is nothing to extend, and Apply would
		// refuse a limit that does not grow, closing the window.
		t.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	t.refreshing = ch
	t.mu.Unlock()

	_, err := commands.CommitNew(ctx, decider, &logpb.ExtendTSOWindow{LimitPhysicalMs: want}, "")

	t.mu.Lock()
	defer t.mu.Unlock()
	t.refreshing = nil
	close(ch)
	switch {
	case t.term != term && err != nil:
		// The extension's own error first: an unknown outcome stays one.
		return fmt.Errorf("extend tso window to %d: %w", want, err)
	case t.term != term:
		return errNotLeader
	case err != nil:
		t.dropLocked() // re-read the committed limit rather than trust ours
		return fmt.Errorf("extend tso window to %d: %w", want, err)
	}
	w = t.win.Load() // this term's window: t.term == term
	w.limit.Store(max(w.limit.Load(), want))
	return nil
}

// PhysicalMs is the physical part (milliseconds) the next timestamp would
// have if it were handed out now, read without handing one out: the
// clock, or the window's position when that leads the clock. A term whose
// window is not open yet starts at the committed limit (resetLocked), so
// that is what it answers then: after a failover the oracle leads the
// clock by up to one window until the clock catches up, and a deadline
// stated as a timestamp (an allocation's expiry) must be measured from
// here, not from the clock.
func (t *TSO) PhysicalMs() int64 {
	term := t.leader.EstablishedTerm()
	committed := t.leader.State().TSOLimitPhysicalMs()
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Clock.Now().UnixMilli()
	if term == 0 || t.term != term {
		return max(now, committed)
	}
	physical, _ := t.win.Load().position()
	return max(now, physical)
}

// Skew is the physical part of the last timestamp handed out minus the
// clock (positive: the oracle runs ahead), and false when this node serves
// no term.
func (t *TSO) Skew() (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.term == 0 {
		return 0, false
	}
	physical, _ := t.win.Load().position()
	return time.Duration(physical-t.cfg.Clock.Now().UnixMilli()) * time.Millisecond, true
}

// Run is the leader routine: keep the window ahead of the clock until ctx
// ends, proposing through the routine's proposer p, as decisions of term.
func (t *TSO) Run(ctx context.Context, term uint64, p commands.Proposer) {
	tick := t.cfg.Clock.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_ = t.refresh(ctx, term, p)
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
	}
}
