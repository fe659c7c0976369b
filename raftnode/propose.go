package raftnode

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// maxEntryBodyBytes caps the bodies batched into one entry, well under
// commands.MaxEntryBytes so envelopes always fit.
const maxEntryBodyBytes = 2 << 20

// Propose commits one command built by commands.New (which validated it)
// and returns its result once it is applied on this node. The command's
// LeaderTerm is its decision term: set explicitly (Command.DecidedIn), else
// the commands.DecisionTerm option's (a leader routine's proposer adds its
// own term, see LeaderRoutine), else the term current at submission. Apply
// refuses it once a newer leader has established itself. Errors:
// *NotLeaderError (nothing done), ErrOutcomeUnknown, ErrShuttingDown,
// commands.ErrInvalid for a command not built by commands.New (nothing done),
// *OverloadedError when Config.MaxPendingProposals proposals are waiting
// already (nothing done; a leader routine's proposal waits instead),
// *StateBudgetError for a command that grows the state while it is at its
// Config.StateBudget (nothing done; state_budget.go). Once
// the command is queued, Propose calls its commands.OnQueued function.
func (n *Node) Propose(ctx context.Context, c commands.Command, opts ...commands.Option) (*logpb.Result, error) {
	if !c.Checked() {
		return nil, vocab.Errorf(commands.ErrInvalid, "%s was not built by commands.New", c.Type)
	}
	pr := commands.Prepare(c, opts...) // the one reader of c's options
	c = pr.Command
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("propose %s: %w (not submitted)", c.Type, err)
	}
	if !n.IsLeader() {
		return nil, n.notLeader()
	}
	if err := n.gauge.admit(c); err != nil {
		return nil, err // the memory guard: never proposed, nothing done
	}
	p := &proposal{cmd: c, size: proto.Size(c.Body), chained: pr.Chained, done: make(chan proposalResult, 1)}
	if err := n.proposer.q.offer(ctx, p, pr.Routine, n.closed); err != nil {
		return nil, err
	}
	// p is in the FIFO queue now, and the one batcher submits entries in
	// queue order: anything offered after this point goes to the log after
	// p (commands.OnQueued; the manifest committer releases its segment
	// lock here).
	pr.Queued()
	start := time.Now()
	select {
	case r := <-p.done:
		if r.err == nil && n.proposeObserver != nil {
			n.proposeObserver(time.Since(start))
		}
		return r.result, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("propose %s: %w: %v", c.Type, ErrOutcomeUnknown, ctx.Err())
	case <-n.closed:
		return nil, fmt.Errorf("propose %s: %w: node shut down", c.Type, ErrOutcomeUnknown)
	}
}

type proposal struct {
	cmd  commands.Command
	size int
	// chained: heading the queue, p may go out in an entry beyond the
	// inflight bound (commands.Chained).
	chained bool
	done    chan proposalResult
}

type proposalResult struct {
	result *logpb.Result
	err    error
}

// batcher is the group-commit loop: it takes whatever proposals are waiting,
// packs them into one log entry, and keeps at most `inflight` entries
// waiting on raft at once. Under light load each proposal goes out alone at
// once; under heavy load entries grow instead of queueing, and once
// `inflight` entries are with raft, proposals wait in q, which refuses
// callers past its bound. A chained proposal (commands.Chained) at the
// head of the queue may take one more entry slot (chainSlot), so it goes
// out while the entry it follows is in flight; the queue's order holds.
type batcher struct {
	n         *Node
	q         *proposalQueue
	slots     chan struct{}
	chainSlot chan struct{} // capacity 1
	// inflight counts the entries submitted and not yet answered.
	inflight atomic.Int64
	stopc    chan struct{}
	done     chan struct{}
}

func newBatcher(n *Node, inflight, maxPending int) *batcher {
	b := &batcher{
		n:         n,
		q:         newProposalQueue(maxPending),
		slots:     make(chan struct{}, inflight),
		chainSlot: make(chan struct{}, 1),
		stopc:     make(chan struct{}),
		done:      make(chan struct{}),
	}
	go b.run()
	return b
}

func (b *batcher) stop() {
	close(b.stopc)
	<-b.done
}

// settle waits, at most d, until every entry already handed to raft has
// been answered. Shutdown calls it before stopping raft: hashicorp/raft
// v1.8 never answers a future whose committed entry is still queued for
// its FSM goroutine when raft shuts down (runFSM returns without draining
// that queue), which would leave the entry's callers and its waiting
// goroutine blocked for good. Before raft stops, such an entry is applied
// (or the leadership is lost and raft answers it). Reports whether every
// entry was answered in time.
func (b *batcher) settle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for b.inflight.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func (b *batcher) run() {
	defer close(b.done)
	var carry *proposal
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-b.q.ch:
			case <-b.stopc:
				b.failPending()
				return
			}
		}
		// A slot before the proposal counts as taken: while every slot is
		// taken, proposals (the head included) stay pending, so q's depth
		// is exactly what waits for raft and its bound refuses callers.
		slot, ok := b.slotFor(first)
		if !ok {
			b.q.taken()
			first.done <- proposalResult{err: ErrShuttingDown}
			b.failPending()
			return
		}
		b.q.taken()
		batch, size := []*proposal{first}, first.size
	drain:
		for len(batch) < commands.MaxCommandsPerEntry {
			select {
			case p := <-b.q.ch:
				if size+p.size > maxEntryBodyBytes {
					carry = p // still pending: it heads the next entry
					break drain
				}
				b.q.taken()
				batch = append(batch, p)
				size += p.size
			default:
				break drain
			}
		}
		b.submit(batch, slot)
	}
}

// slotFor waits for an entry slot for a batch headed by first: one of the
// inflight slots, or for a chained proposal also the chain slot. It
// returns the slot's channel, to release it into, or false on stop.
func (b *batcher) slotFor(first *proposal) (chan struct{}, bool) {
	if first.chained {
		select {
		case b.slots <- struct{}{}:
			return b.slots, true
		case b.chainSlot <- struct{}{}:
			return b.chainSlot, true
		case <-b.stopc:
			return nil, false
		}
	}
	select {
	case b.slots <- struct{}{}:
		return b.slots, true
	case <-b.stopc:
		return nil, false
	}
}

// failPending answers every queued proposal on shutdown; none was submitted.
func (b *batcher) failPending() {
	for {
		select {
		case p := <-b.q.ch:
			b.q.taken()
			p.done <- proposalResult{err: ErrShuttingDown}
		default:
			return
		}
	}
}

// submit stamps, encodes and applies one entry, then answers its proposals
// from a goroutine so the loop can build the next entry meanwhile.
func (b *batcher) submit(batch []*proposal, slot chan struct{}) {
	b.inflight.Add(1)
	release := func() { b.inflight.Add(-1); <-slot }
	term := b.n.raft.CurrentTerm()
	now := time.Now().UnixMilli()
	cmds := make([]commands.Command, len(batch))
	for i, p := range batch {
		c := p.cmd
		c.ProposedAtUnixMs = now
		if c.LeaderTerm == 0 {
			c.LeaderTerm = term
		}
		cmds[i] = c
	}
	data, err := commands.EncodeEntry(cmds)
	if err != nil {
		release()
		for _, p := range batch {
			p.done <- proposalResult{err: fmt.Errorf("encode entry: %w", err)}
		}
		return
	}
	// The entry does not exist before this instant, so its commit proves a
	// quorum heard from this leader after it (see leaderLease).
	anchor := b.n.lease.now()
	f := b.n.raft.Apply(data, b.n.cfg.ApplyTimeout)
	go func() {
		defer release()
		err := f.Error()
		if err == nil {
			b.n.lease.extend(term, anchor)
		}
		if err != nil {
			err = b.n.classifyApplyError(err)
			for _, p := range batch {
				p.done <- proposalResult{err: err}
			}
			return
		}
		resp, ok := f.Response().(applyResponse)
		if !ok || len(resp.results) != len(batch) {
			err := fmt.Errorf("%w: unexpected apply response %T", ErrOutcomeUnknown, f.Response())
			for _, p := range batch {
				p.done <- proposalResult{err: err}
			}
			return
		}
		for i, p := range batch {
			p.done <- proposalResult{result: resp.results[i]}
		}
	}()
}

// classifyApplyError separates "certainly not done" from "maybe done".
func (n *Node) classifyApplyError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return n.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	default: // ErrLeadershipLost, ErrEnqueueTimeout and anything else
		return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	}
}
