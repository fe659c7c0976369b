package manifest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/testutil"
)

// pipeLeader is the fake leader with a log in front: Propose queues the
// command in a FIFO, calls the commands.OnQueued function as raftnode does,
// and one goroutine applies the queue in order, each command after delay
// (a raft round), to the wrapped fake. So several commands are in flight
// at once, as on a real leader, and their log order is their queue order.
type pipeLeader struct {
	*controllertest.Leader
	delay time.Duration
	q     chan *pipeItem
	stop  chan struct{}

	mu          sync.Mutex
	gate        chan struct{} // while set, the applier waits before the next command
	inflight    int
	maxInflight int
	queued      atomic.Int64
}

type pipeItem struct {
	c    commands.Command
	done chan pipeResult
}

type pipeResult struct {
	res *logpb.Result
	err error
}

func newPipeLeader(t testing.TB, l *controllertest.Leader, delay time.Duration) *pipeLeader {
	p := &pipeLeader{Leader: l, delay: delay, q: make(chan *pipeItem, 4096), stop: make(chan struct{})}
	done := make(chan struct{})
	go p.run(done)
	t.Cleanup(func() { close(p.stop); <-done })
	return p
}

func (p *pipeLeader) Propose(ctx context.Context, c commands.Command, opts ...commands.Option) (*logpb.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pipeLeader: %w (not submitted)", err)
	}
	pr := commands.Prepare(c, opts...) // read as raftnode and the fake leader read it
	it := &pipeItem{c: pr.Command, done: make(chan pipeResult, 1)}
	p.mu.Lock()
	p.inflight++
	p.maxInflight = max(p.maxInflight, p.inflight)
	p.q <- it // under mu: queue order is the order of this section
	p.mu.Unlock()
	p.queued.Add(1)
	pr.Queued()
	select {
	case r := <-it.done:
		return r.res, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("pipeLeader: %w: %v", leadership.ErrOutcomeUnknown, ctx.Err())
	}
}

func (p *pipeLeader) run(done chan struct{}) {
	defer close(done)
	for {
		var it *pipeItem
		select {
		case it = <-p.q:
		case <-p.stop:
			return
		}
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-p.stop:
				return
			}
		}
		if p.delay > 0 {
			time.Sleep(p.delay) // not a wait: the simulated raft round of every command
		}
		res, err := p.Leader.Propose(context.Background(), it.c)
		p.mu.Lock()
		p.inflight--
		p.mu.Unlock()
		it.done <- pipeResult{res, err}
	}
}

// hold stops the applier before the next command it takes, until the
// returned function is called.
func (p *pipeLeader) hold() func() {
	ch := make(chan struct{})
	p.mu.Lock()
	p.gate = ch
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.gate = nil
		p.mu.Unlock()
		close(ch)
	}
}

// waitQueued waits until n commands in all were queued.
func (p *pipeLeader) waitQueued(t testing.TB, n int64) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("%d commands queued", n), func() bool { return p.queued.Load() >= n })
}

func (p *pipeLeader) maxInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxInflight
}

// newPipeFixture is newFixture with the committer on a pipeLeader.
func newPipeFixture(t *testing.T, cfg Config, delay time.Duration) (*fixture, *pipeLeader) {
	t.Helper()
	f := newFixture(t, cfg)
	p := newPipeLeader(t, f.l, delay)
	cfg.Store = f.store
	f.c = New(p, cfg)
	return f, p
}

// heldCommit is a commit "a" (stats key a) on segment 5, queued behind a
// held log: its tail (v2) is pending, nothing has applied.
type heldCommit struct {
	ctx     context.Context
	release func()       // lets the log apply what is queued
	queued  int64        // the queue count before a
	aErr    <-chan error // a's result once it applies
}

// startHeldCommit creates segment 5 (v1) on a pipelining fixture, holds its
// log and queues commit a on it.
func startHeldCommit(t *testing.T) (*Metrics, *fixture, *pipeLeader, heldCommit) {
	t.Helper()
	m := newTestMetrics(t)
	f, p := newPipeFixture(t, Config{Metrics: m}, 0)
	f.create(5)
	h := heldCommit{ctx: f.l.Deadline(), release: p.hold(), queued: p.queued.Load()}
	aErr := make(chan error, 1)
	go func() { _, err := commitProto(h.ctx, f.c, statsReq(5, "a", "a")); aErr <- err }()
	p.waitQueued(t, h.queued+1)
	h.aErr = aErr
	return m, f, p, h
}
