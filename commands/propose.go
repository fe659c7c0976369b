package commands

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// Proposer commits commands: the raft node, or a test's fake of it. The flow
// behind it is docs/architecture.md#command-flow.
type Proposer interface {
	// Propose commits c (built by New) and returns its result once the
	// entry is committed and applied on this node.
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
	// leader routine's ctx, see WithDecisionTerm); Apply refuses it with
	// REJECT_STALE once a newer leader has established itself
	// (docs/architecture.md#fencing).
	Propose(ctx context.Context, c Command) (*logpb.Result, error)
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

type decisionTermKey struct{}

// WithDecisionTerm returns ctx marked with the raft term in which a leader
// routine makes its decisions (the term it was started in). A command
// proposed with such a context and no LeaderTerm of its own carries that
// term, so Apply refuses it once a newer leader has established itself,
// however long the routine took to notice it was deposed.
func WithDecisionTerm(ctx context.Context, term uint64) context.Context {
	return context.WithValue(ctx, decisionTermKey{}, term)
}

// DecisionTerm returns the term WithDecisionTerm put into ctx, or 0.
func DecisionTerm(ctx context.Context) uint64 {
	t, _ := ctx.Value(decisionTermKey{}).(uint64)
	return t
}

type callerNodeKey struct{}

// WithCallerNode returns ctx marked with the node identity of the
// authenticated node credential a call comes from (the API server sets it
// once it has checked that the caller may speak for the session the call
// names). A command proposed with such a context and no CallerNode of its
// own carries it, and Apply refuses the command if it speaks for a session
// bound to another identity (docs/security.md#per-node-identity).
func WithCallerNode(ctx context.Context, node uint64) context.Context {
	return context.WithValue(ctx, callerNodeKey{}, node)
}

// CallerNode returns the node identity WithCallerNode put into ctx, or 0.
func CallerNode(ctx context.Context) uint64 {
	n, _ := ctx.Value(callerNodeKey{}).(uint64)
	return n
}

type queuedKey struct{}

// WithQueued returns ctx carrying f, for a caller that orders its own
// work by log order (the manifest committer, docs/semantics.md#manifest-pipelining).
// A Proposer that supports it calls f once, from Propose, as soon as the
// command has its place in the order entries are submitted to the log:
// a command proposed after f returned is submitted after this one, so if
// both reach the log this one is before it. It is called before the
// command commits, and never when Propose fails before queueing it. A
// Proposer may not support it at all (test fakes): a caller must also
// treat Propose's return as the end of the wait (sync.Once).
func WithQueued(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, queuedKey{}, f)
}

type chainedKey struct{}

// WithChained marks a proposal made right behind an earlier one of the
// caller's that is still in flight (a broadcast's create queued behind the
// completion it follows, docs/semantics.md#resource-keys): a Proposer that
// bounds the entries in flight may send it while that bound is reached,
// one entry beyond it, so its round overlaps the earlier one's instead of
// following it. The order of queued proposals is unchanged.
func WithChained(ctx context.Context) context.Context {
	return context.WithValue(ctx, chainedKey{}, true)
}

// Chained reports whether ctx marks a chained proposal (WithChained).
func Chained(ctx context.Context) bool { return ctx.Value(chainedKey{}) != nil }

// NotifyQueued calls the function WithQueued put into ctx, if any. A
// Proposer calls it once c is queued in log order.
func NotifyQueued(ctx context.Context) {
	if f, _ := ctx.Value(queuedKey{}).(func()); f != nil {
		f()
	}
}
