package commands

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// Proposer commits commands: the raft node, or a test's fake of it. The flow
// behind it is docs/architecture.md#command-flow.
type Proposer interface {
	// Propose commits c (built by New) and returns its result once the
	// entry is committed and applied on this node, proposed as opts say.
	// Every Proposer reads c, ctx's scope and opts through Prepare, so the
	// raft node and a fake cannot read them differently.
	//
	// A nil error means the command was applied: the result is either a
	// success or a Rejection, a deterministic refusal that every replica
	// made identically and that changed nothing
	// (docs/semantics.md#error-classes). A non-nil error means one of:
	//   - nothing was done: this node does not lead, is shutting down, c was
	//     not built by New, or ctx ended before submission;
	//   - the outcome is unknown: leadership was lost, the node shut down,
	//     or ctx ended while the entry was in flight. The command may still
	//     be applied; retrying is safe only with a request ID or for an
	//     idempotent command.
	// The errors of package leadership say which (leadership.ErrNotLeader,
	// leadership.ErrOutcomeUnknown, ...).
	//
	// c carries its decision term (Command.DecidedIn, or the term of a
	// leader routine's scope, see WithDecisionTerm); Apply refuses it with
	// REJECT_STALE once a newer leader has established itself
	// (docs/architecture.md#fencing).
	Propose(ctx context.Context, c Command, opts ...Option) (*logpb.Result, error)
}

// Option is one of a proposal's optional parameters (OnQueued, Chained).
// A proposal with none is a plain one.
type Option func(*options)

type options struct {
	onQueued func()
	chained  bool
}

// OnQueued has the Proposer call f once, from Propose, as soon as the
// command has its place in the order entries are submitted to the log: a
// command proposed after f returned is submitted after this one, so if
// both reach the log this one is before it. f is called before the command
// commits, and never when Propose fails before queueing it. A caller that
// orders its own work by log order uses it (the manifest committer
// releases its segment lock there, docs/semantics.md#manifest-pipelining;
// the broadcaster hands a resource key to the next task).
func OnQueued(f func()) Option { return func(o *options) { o.onQueued = f } }

// Chained marks a proposal made right behind an earlier one of the
// caller's that is still in flight (a broadcast's create queued behind the
// completion it follows, docs/semantics.md#resource-keys): a Proposer that
// bounds the entries in flight may send it while that bound is reached,
// one entry beyond it, so its round overlaps the earlier one's instead of
// following it. The order of queued proposals is unchanged.
func Chained() Option { return func(o *options) { o.chained = true } }

// Proposal is a proposal as every Proposer reads it (Prepare): the command
// with its scope stamped in, and the options.
type Proposal struct {
	// Command is c with its decision term and caller node filled in from
	// ctx's scope where it carries none of its own.
	Command Command
	// Chained: the caller asked for Chained.
	Chained bool
	// Routine says the proposal comes from a leader routine (ctx's scope,
	// WithLeaderRoutine): a Proposer with a bounded queue lets it wait for
	// room instead of refusing it.
	Routine bool

	onQueued func()
	once     *sync.Once
}

// Prepare is the one reader of a proposal, shared by every Proposer: it
// stamps c with ctx's scope (decision term, caller node) where c has none
// of its own, and applies opts. A Proposer calls it first and then reads
// only the Proposal.
func Prepare(ctx context.Context, c Command, opts ...Option) Proposal {
	var o options
	for _, f := range opts {
		f(&o)
	}
	s := scopeOf(ctx)
	if c.LeaderTerm == 0 {
		c.LeaderTerm = s.decisionTerm // a leader routine's own term
	}
	if c.CallerNode == 0 {
		c.CallerNode = s.callerNode // the node credential the API checked
	}
	return Proposal{Command: c, Chained: o.chained, Routine: s.routine, onQueued: o.onQueued, once: new(sync.Once)}
}

// Queued tells the caller's OnQueued function, if any, that the command has
// its place in log order. A Proposer calls it once it has; later calls do
// nothing.
func (p Proposal) Queued() {
	if p.onQueued != nil && p.once != nil {
		p.once.Do(p.onQueued)
	}
}

// Propose builds body with New and proposes it with p. A validation error
// comes back before anything is proposed. A refusal stays inside the
// result; code that acts on the outcome uses CommitNew, which turns it
// into a *RejectedError, and Propose is for the callers that read the
// Rejection itself (tests of Apply's answers).
func Propose(ctx context.Context, p Proposer, body proto.Message, requestID string) (*logpb.Result, error) {
	c, err := New(body, requestID)
	if err != nil {
		return nil, err
	}
	return p.Propose(ctx, c)
}
