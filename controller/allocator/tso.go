package allocator

import (
	"context"
	"fmt"
	"sync"
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
	// Clock reads the time and runs the refresh ticker; default the real
	// clock. Tests pass a fake and advance it.
	Clock clockwork.Clock
}

// TSO is the timestamp oracle.
type TSO struct {
	leader Leader
	cfg    TSOConfig

	mu       sync.Mutex
	term     uint64 // term the window belongs to; 0 = none
	physical int64
	logical  int64
	limit    int64 // committed limit, exclusive
}

// NewTSO returns a TSO that serves while leader leads.
func NewTSO(leader Leader, cfg TSOConfig) *TSO {
	if cfg.Window <= 0 {
		cfg.Window = 3 * time.Second
	}
	if cfg.RefreshBefore <= 0 || cfg.RefreshBefore >= cfg.Window {
		cfg.RefreshBefore = cfg.Window / 3
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	return &TSO{leader: leader, cfg: cfg}
}

// Alloc returns the first of count consecutive timestamps.
func (t *TSO) Alloc(ctx context.Context, count uint32) (uint64, error) {
	if count == 0 || count >= maxLogical {
		return 0, fmt.Errorf("timestamp count must be in 1..%d, got %d", maxLogical-1, count)
	}
	term := t.leader.EstablishedTerm()
	if term == 0 {
		return 0, errNotLeader
	}
	// The window is extended for this term's decisions only.
	first, err := t.take(commands.WithDecisionTerm(ctx, term), term, int64(count))
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

// take reserves count logical values under the lock, extending the
// committed window first when the next value would reach it.
func (t *TSO) take(ctx context.Context, term uint64, count int64) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.term != term {
		if err := t.resetLocked(ctx, term); err != nil {
			return 0, err
		}
	}
	now := t.cfg.Clock.Now().UnixMilli()
	if now > t.physical {
		t.physical, t.logical = now, 0
	}
	if t.logical+count > maxLogical {
		t.physical, t.logical = t.physical+1, 0
	}
	if t.physical >= t.limit {
		if err := t.extendLocked(ctx, max(t.physical, now)); err != nil {
			return 0, err
		}
	}
	first := ComposeTS(t.physical, t.logical)
	t.logical += count
	return first, nil
}

// resetLocked starts a window for a newly established term, strictly above
// everything earlier leaders could have handed out.
func (t *TSO) resetLocked(ctx context.Context, term uint64) error {
	t.term = 0
	committed := t.leader.State().TSOLimitPhysicalMs()
	start := max(t.cfg.Clock.Now().UnixMilli(), committed)
	t.physical, t.logical, t.limit = start, 0, committed
	if err := t.extendLocked(ctx, start); err != nil {
		return err
	}
	t.term = term
	return nil
}

// extendLocked commits limit = from + window and adopts it.
func (t *TSO) extendLocked(ctx context.Context, from int64) error {
	want := from + t.cfg.Window.Milliseconds()
	res, err := commands.Propose(ctx, t.leader, &logpb.ExtendTSOWindow{LimitPhysicalMs: want}, "")
	if err != nil {
		t.term = 0
		return fmt.Errorf("extend tso window: %w", err)
	}
	if res.Rejection != nil {
		// Someone (a previous window of ours) already committed a higher
		// limit; re-read it rather than trust our copy.
		t.term = 0
		return fmt.Errorf("extend tso window to %d: %s", want, res.Rejection.Message)
	}
	t.limit = want
	return nil
}

// Refresh extends the window ahead of need so Alloc rarely waits on raft.
// The leader routine calls it periodically.
func (t *TSO) Refresh(ctx context.Context, term uint64) error {
	ctx = commands.WithDecisionTerm(ctx, term)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.term != term {
		return t.resetLocked(ctx, term)
	}
	now := t.cfg.Clock.Now().UnixMilli()
	if t.limit-max(now, t.physical) > t.cfg.RefreshBefore.Milliseconds() {
		return nil
	}
	return t.extendLocked(ctx, max(now, t.physical))
}

// Run is the leader routine: keep the window ahead of the clock until ctx
// ends.
func (t *TSO) Run(ctx context.Context, term uint64) {
	ctx = commands.WithDecisionTerm(ctx, term) // every proposal carries this term
	tick := t.cfg.Clock.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_ = t.Refresh(ctx, term)
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
	}
}
