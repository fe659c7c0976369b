package raftnode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// LeaderRoutine is leader-only work. It starts after this node has
// established itself in a term (Barrier, then LeaderEstablished committed)
// and must return promptly once ctx is cancelled on step-down. It proposes
// through p, this node marked for the routine: every proposal made through
// p is a decision of term (commands.Fenced) and waits for room in a full
// proposal queue instead of being refused (commands.AsRoutine), so a
// client flood cannot starve the routines that keep the cluster healthy.
type LeaderRoutine func(ctx context.Context, term uint64, p commands.Proposer)

// leadership drains raft's NotifyCh and runs the establish/revoke pair.
type leadership struct {
	n      *Node
	notify <-chan bool

	mu       sync.Mutex
	routines map[string]LeaderRoutine

	stopc chan struct{}
	done  chan struct{}
}

func newLeadership(n *Node, notify <-chan bool) *leadership {
	l := &leadership{n: n, notify: notify, routines: map[string]LeaderRoutine{},
		stopc: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

// AddLeaderRoutine registers work to run while this node leads. Routines
// added while the node already leads start at the next establishment.
func (n *Node) AddLeaderRoutine(name string, r LeaderRoutine) {
	n.leader.mu.Lock()
	n.leader.routines[name] = r
	n.leader.mu.Unlock()
}

func (l *leadership) stop() {
	close(l.stopc)
	<-l.done
}

// run consumes every notification immediately (a blocked NotifyCh would
// stall raft) and keeps at most one term's routines alive.
func (l *leadership) run() {
	defer close(l.done)
	var current *leaderTerm
	revoke := func() {
		if current != nil {
			current.cancel()
			current.wg.Wait()
			current = nil
		}
		l.n.establishedTerm.Store(0)
	}
	for {
		select {
		case <-l.stopc:
			revoke()
			return
		case isLeader := <-l.notify:
			revoke()
			if !isLeader {
				l.n.logger.Info("lost leadership")
				continue
			}
			current = l.startTerm()
		}
	}
}

// leaderTerm is the work of one gained leadership.
type leaderTerm struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (l *leadership) startTerm() *leaderTerm {
	ctx, cancel := context.WithCancel(context.Background())
	t := &leaderTerm{cancel: cancel}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		l.establish(ctx)
	}()
	return t
}

// establish runs once per gained leadership: Barrier (everything earlier
// leaders committed is applied), commit LeaderEstablished for this term,
// then start the routines. It retries until it succeeds or ctx ends.
func (l *leadership) establish(ctx context.Context) {
	n := l.n
	term := n.raft.CurrentTerm()
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return
		}
		err := l.tryEstablish(ctx, term)
		if err == nil {
			break
		}
		n.logger.Warn("establishing leadership failed", "term", term, "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	n.establishedTerm.Store(term)
	n.logger.Info("leadership established", "term", term)
	l.mu.Lock()
	routines := make(map[string]LeaderRoutine, len(l.routines))
	for k, v := range l.routines {
		routines[k] = v
	}
	l.mu.Unlock()
	// Every proposal a routine makes carries the term it was started in
	// and waits for room in the queue; only callers' proposals are refused
	// when it is full.
	p := commands.Fenced(commands.With(n, commands.AsRoutine()), term)
	var wg sync.WaitGroup
	for name, r := range routines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r(ctx, term, p)
			if ctx.Err() == nil {
				n.logger.Debug("leader routine returned early", "routine", name)
			}
		}()
	}
	wg.Wait()
}

func (l *leadership) tryEstablish(ctx context.Context, term uint64) error {
	n := l.n
	if err := n.raft.Barrier(5 * time.Second).Error(); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	if n.raft.CurrentTerm() != term {
		return fmt.Errorf("term moved on from %d", term)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := commands.New(&logpb.LeaderEstablished{Term: term, LeaderId: n.cfg.ID}, "")
	if err != nil {
		return fmt.Errorf("build LeaderEstablished: %w", err)
	}
	// A routine's proposal: it waits for room in a full queue.
	res, err := n.Propose(pctx, c.DecidedIn(term), commands.AsRoutine())
	if err != nil {
		return fmt.Errorf("commit LeaderEstablished: %w", err)
	}
	if res.Rejection != nil {
		return fmt.Errorf("commit LeaderEstablished: %s", res.Rejection.Message)
	}
	return nil
}
