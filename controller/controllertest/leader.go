package controllertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/testutil"
	"github.com/coordd/coordd/vocab"
)

// ErrNotLeader is what the fake's Propose returns while it refuses
// (SetRefuse). It is leadership.ErrNotLeader, as a real node's would be.
var ErrNotLeader = fmt.Errorf("controllertest: %w", leadership.ErrNotLeader)

// ErrOverloaded is what the fake's Propose returns for a client's
// proposal while its queue is full (SetQueueFull): of vocab's Exhausted
// class, as the raft node's refusal is.
var ErrOverloaded = vocab.NewSentinel(vocab.ClassExhausted, "controllertest: proposal queue is full")

// Leader is a fake leader: State, StateChanged, EstablishedTerm,
// VerifyLeader and Propose over a real FSM state. It satisfies the Leader
// interface of every controller. The zero value is not usable; call
// NewLeader.
type Leader struct {
	clock    clockwork.Clock
	deadline context.Context // ends at the test's own bound (see NewLeader)
	// established is what EstablishedTerm returns (0 = not leader).
	established atomic.Uint64

	mu       sync.Mutex
	st       *fsm.State
	index    uint64
	changed  chan struct{}
	raftTerm uint64          // stamped as LeaderTerm on every command
	applied  []proto.Message // bodies applied, in order
	decided  []uint64        // decided[i]: the decision term applied[i] came with, 0 if none
	routine  []bool          // routine[i]: applied[i] was a leader routine's (commands.AsRoutine)
	callers  []uint64        // callers[i]: the node identity applied[i] was stamped with, 0 if none
	refuse   bool
	// full: the proposal queue is full (SetQueueFull); nothing applies.
	full   bool
	verify error
	// before runs outside the lock before every proposal; an error fails
	// the proposal unapplied. It may block.
	before func(body proto.Message) error
	// once, if set, runs (then is cleared) before the next proposal; when
	// it returns false it stays set for the one after. It may Propose.
	once func(body proto.Message) bool
	// after runs after a proposal was applied; an error is returned
	// instead of the result (an "outcome unknown" answer).
	after func(body proto.Message) error
	// Proposals apply in the order they were queued, as a raft node's
	// batcher submits them: queued is the next ticket, applying the one
	// whose turn it is, turn (on mu) signals a change of turn.
	queued, applying uint64
	turn             *sync.Cond
	// queuedHook runs outside the lock once a proposal has its place in
	// the order and before it applies; it may block (later proposals
	// queue behind it meanwhile).
	queuedHook func(body proto.Message)
}

// TestDeadline bounds every test that builds a fake leader: controller
// tests wait on channels and goroutines of the code under test, and a
// broken controller must fail its test in a minute (with every goroutine's
// stack, see testutil.Deadline), not hang until go test's global timeout.
const TestDeadline = time.Minute

// NewLeader returns a leader established at term: its FSM has committed
// LeaderEstablished for term. clock stamps ProposedAtUnixMs. It arms the
// test's own deadline (TestDeadline); Deadline returns its context.
func NewLeader(t testing.TB, clock clockwork.Clock, term uint64) *Leader {
	t.Helper()
	l := &Leader{clock: clock, st: fsm.New(), changed: make(chan struct{}),
		deadline: testutil.Deadline(t, TestDeadline)}
	l.turn = sync.NewCond(&l.mu)
	l.Establish(t, term)
	return l
}

// Deadline is a context that ends at the test's own bound, for calls that
// may block.
func (l *Leader) Deadline() context.Context { return l.deadline }

// Establish makes the fake the established leader of term: later
// commands carry term, and LeaderEstablished for term is committed.
func (l *Leader) Establish(t testing.TB, term uint64) {
	t.Helper()
	l.SetRaftTerm(term)
	l.established.Store(term)
	l.MustPropose(t, &logpb.LeaderEstablished{Term: term, LeaderId: fmt.Sprintf("coord-%d", term)})
}

// SetEstablished changes only what EstablishedTerm reports (0: not the
// leader); Propose goes on applying unless SetRefuse is set too.
func (l *Leader) SetEstablished(term uint64) { l.established.Store(term) }

// SetRaftTerm changes the term stamped on later commands, as a deposed
// leader's proposals still carry its old term.
func (l *Leader) SetRaftTerm(term uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raftTerm = term
}

// SetRefuse makes Propose fail with ErrNotLeader like a node that lost
// leadership, while EstablishedTerm still answers.
func (l *Leader) SetRefuse(refuse bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refuse = refuse
}

// SetQueueFull models a raft node whose proposal queue is full (true)
// until it moves again (false): meanwhile nothing applies, a client's
// proposal is refused with ErrOverloaded before it is queued, and a
// leader routine's (commands.AsRoutine) is queued and waits, as on
// raftnode (docs/architecture.md#command-flow).
func (l *Leader) SetQueueFull(full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.full = full
	l.turn.Broadcast()
}

// SetVerifyError sets what VerifyLeader returns.
func (l *Leader) SetVerifyError(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.verify = err
}

// SetBeforePropose installs f, run before every proposal (see Leader).
func (l *Leader) SetBeforePropose(f func(body proto.Message) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.before = f
}

// SetBeforeNextApply installs f, run once before a later proposal is
// applied: it stays installed while it returns false (not its body).
func (l *Leader) SetBeforeNextApply(f func(body proto.Message) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.once = f
}

// SetAfterQueued installs f, run for every proposal once it has its
// place in the order and before it applies (see Leader). It may block.
func (l *Leader) SetAfterQueued(f func(body proto.Message)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queuedHook = f
}

// Queued is how many proposals have taken their place in the order.
func (l *Leader) Queued() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued
}

// SetAfterApply installs f, run after every applied proposal (see Leader).
func (l *Leader) SetAfterApply(f func(body proto.Message) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.after = f
}

// State is the current FSM state.
func (l *Leader) State() *fsm.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

// StateChanged is closed at the next applied proposal.
func (l *Leader) StateChanged() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// EstablishedTerm is the term this fake leads, or 0.
func (l *Leader) EstablishedTerm() uint64 { return l.established.Load() }

// VerifyLeader returns the error set by SetVerifyError.
func (l *Leader) VerifyLeader(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.verify
}

// IsLeader reports whether the fake leads in an established term (it
// knows no leader that has not established itself).
func (l *Leader) IsLeader() bool { return l.EstablishedTerm() != 0 }

// LinearizableRead is the newest state once VerifyLeader succeeds (every
// proposal is applied at once, so nothing committed is missing from it).
func (l *Leader) LinearizableRead(ctx context.Context) (*fsm.State, error) {
	if err := l.VerifyLeader(ctx); err != nil {
		return nil, err
	}
	return l.State(), nil
}

// Propose applies c (built by commands.New) at once after running the
// hooks, in the order proposals were queued (it calls the commands.OnQueued
// function once c has its place). It reads c and opts through
// commands.Prepare, as raftnode does: c carries its decision term (its own
// LeaderTerm, else commands.DecisionTerm's, else the fake's raft term) and
// caller node (commands.CallerNode), so the FSM fences and checks it as on
// a replica. While the queue is full (SetQueueFull) a client's proposal is
// refused and a routine's (commands.AsRoutine) waits; a chained proposal
// is like any other here (the fake has no bound on entries in flight). A
// rejection comes back in the result, as from raftnode.
func (l *Leader) Propose(ctx context.Context, c commands.Command, opts ...commands.Option) (*logpb.Result, error) {
	if !c.Checked() {
		return nil, vocab.Errorf(commands.ErrInvalid, "%s was not built by commands.New", c.Type)
	}
	pr := commands.Prepare(c, opts...)
	c = pr.Command
	body := c.Body
	decided := c.LeaderTerm
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	before := l.before
	l.mu.Unlock()
	if before != nil {
		if err := before(body); err != nil {
			return nil, err
		}
	}
	l.mu.Lock()
	if l.refuse {
		l.mu.Unlock()
		return nil, ErrNotLeader
	}
	if l.full && !pr.Routine {
		l.mu.Unlock()
		return nil, ErrOverloaded // not queued: nothing done
	}
	once := l.once
	l.once = nil
	l.mu.Unlock()
	if once != nil && !once(body) {
		l.mu.Lock()
		if l.once == nil {
			l.once = once // not its body: keep waiting
		}
		l.mu.Unlock()
	}

	// Queued: like raftnode's Propose, tell the OnQueued function; whatever is
	// proposed from now on applies after c.
	l.mu.Lock()
	ticket := l.queued
	l.queued++
	l.mu.Unlock()
	pr.Queued()
	l.mu.Lock()
	hook := l.queuedHook
	l.mu.Unlock()
	if hook != nil {
		hook(body)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.applying != ticket || l.full {
		l.turn.Wait()
	}
	defer func() {
		l.applying++
		l.turn.Broadcast()
	}()
	c.ProposedAtUnixMs = l.clock.Now().UnixMilli()
	if c.LeaderTerm == 0 {
		c.LeaderTerm = l.raftTerm
	}
	next, results, err := l.st.ApplyCommands(l.index+1, c)
	if err != nil {
		return nil, err
	}
	if err := next.CheckInvariants(); err != nil {
		panic(fmt.Sprintf("controllertest: invariant broken after %T: %v", body, err))
	}
	l.index++
	l.st = next
	l.applied = append(l.applied, proto.Clone(body))
	l.decided = append(l.decided, decided)
	l.routine = append(l.routine, pr.Routine)
	l.callers = append(l.callers, c.CallerNode)
	close(l.changed)
	l.changed = make(chan struct{})
	if l.after != nil {
		if err := l.after(body); err != nil {
			return nil, err
		}
	}
	return results[0], nil
}

// MustPropose commits body and fails the test on an error or a rejection.
func (l *Leader) MustPropose(t testing.TB, body proto.Message) *logpb.Result {
	t.Helper()
	res, err := commands.CommitNew(context.Background(), l, body, "")
	if err != nil {
		t.Fatalf("propose %T: %v", body, err)
	}
	return res
}

// Applied returns copies of every applied body, in order.
func (l *Leader) Applied() []proto.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]proto.Message(nil), l.applied...)
}

// AppliedOf returns the applied bodies of type T, in order.
func AppliedOf[T proto.Message](l *Leader) []T {
	var out []T
	for _, b := range l.Applied() {
		if v, ok := b.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// DecisionTerms returns, for every applied body in order, the decision
// term it was proposed with (commands.Command.DecidedIn or
// commands.DecisionTerm's), or 0 when it came without one.
func (l *Leader) DecisionTerms() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.decided...)
}

// RoutineMarks returns, for every applied body in order, whether it was
// proposed as a leader routine's (commands.AsRoutine).
func (l *Leader) RoutineMarks() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.routine...)
}

// CallerNodes returns, for every applied body in order, the node identity
// it was stamped with (commands.CallerNode), or 0.
func (l *Leader) CallerNodes() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.callers...)
}
