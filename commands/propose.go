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
	// Every Proposer reads c and opts through Prepare, so the raft node
	// and a fake cannot read them differently; ctx only bounds the call.
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
	// c carries its decision term (Command.DecidedIn, or the DecisionTerm
	// option a leader routine's proposer adds); Apply refuses it with
	// REJECT_STALE once a newer leader has established itself
	// (docs/architecture.md#fencing).
	Propose(ctx context.Context, c Command, opts ...Option) (*logpb.Result, error)
}

// Option is one of a proposal's optional parameters: how it is proposed
// (OnQueued, Chained, AsRoutine) and whom for (DecisionTerm, CallerNode).
// A proposal with none is a plain one. Options are the only way these
// reach a Proposer: nothing about a proposal travels in its context.
// When an option is given twice, the later one counts.
type Option func(*options)

type options struct {
	onQueued     func()
	chained      bool
	routine      bool
	decisionTerm uint64
	callerNode   uint64
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

// AsRoutine marks a leader routine's proposal: a Proposer with a bounded
// queue lets it wait for room instead of refusing it. Routines propose
// little (a timestamp window, an ack, a node marked down) and must not be
// shut out by a client flood; no client call's proposal has the mark. The
// raft node hands every leader routine a Proposer that adds it (see
// raftnode.LeaderRoutine), so routine code does not repeat it.
func AsRoutine() Option { return func(o *options) { o.routine = true } }

// DecisionTerm stamps the raft term in which the command was decided
// (the term a leader routine was started in) into a command that names
// none of its own (Command.DecidedIn wins), so Apply refuses it once a
// newer leader has established itself, however long the routine took to
// notice it was deposed (docs/architecture.md#fencing). 0 stamps nothing:
// the command gets the term current at submission.
func DecisionTerm(term uint64) Option {
	return func(o *options) {
		if term != 0 {
			o.decisionTerm = term
		}
	}
}

// CallerNode stamps the node identity of the authenticated node credential
// a call comes from into the commands it proposes (Envelope.caller_node),
// once the API has checked that the caller may speak for the session the
// call names; Apply refuses a stamped command that speaks for a session
// bound to another identity (docs/security.md#per-node-identity). 0 (no
// credential: authentication is off) stamps nothing. A command's own
// CallerNode wins.
func CallerNode(node uint64) Option {
	return func(o *options) {
		if node != 0 {
			o.callerNode = node
		}
	}
}

// With returns a Proposer that proposes through p with opts in front of
// every call's own options (so a call's own option of the same kind
// counts). A leader routine holds one (Fenced) and proposes as any caller
// does, without repeating its options at every call.
func With(p Proposer, opts ...Option) Proposer {
	return withOptions{p: p, opts: append([]Option(nil), opts...)}
}

// Fenced returns a Proposer that proposes through p as decisions of term
// (DecisionTerm): a leader routine's proposer for the term it was started
// in.
func Fenced(p Proposer, term uint64) Proposer { return With(p, DecisionTerm(term)) }

type withOptions struct {
	p    Proposer
	opts []Option
}

func (w withOptions) Propose(ctx context.Context, c Command, opts ...Option) (*logpb.Result, error) {
	all := make([]Option, 0, len(w.opts)+len(opts))
	return w.p.Propose(ctx, c, append(append(all, w.opts...), opts...)...)
}

// Proposal is a proposal as every Proposer reads it (Prepare): the command
// with the options' stamps in it, and the options that say how to propose
// it.
type Proposal struct {
	// Command is c with its decision term (DecisionTerm) and caller node
	// (CallerNode) filled in where it carries none of its own.
	Command Command
	// Chained: the caller asked for Chained.
	Chained bool
	// Routine: the proposal comes from a leader routine (AsRoutine); a
	// Proposer with a bounded queue lets it wait for room instead of
	// refusing it.
	Routine bool

	onQueued func()
	once     *sync.Once
}

// Prepare is the one reader of a proposal's options, shared by every
// Proposer: it applies opts and stamps c with their decision term and
// caller node where c has none of its own. A Proposer calls it first and
// then reads only the Proposal.
func Prepare(c Command, opts ...Option) Proposal {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if c.LeaderTerm == 0 {
		c.LeaderTerm = o.decisionTerm // a leader routine's own term
	}
	if c.CallerNode == 0 {
		c.CallerNode = o.callerNode // the node credential the API checked
	}
	return Proposal{Command: c, Chained: o.chained, Routine: o.routine, onQueued: o.onQueued, once: new(sync.Once)}
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
