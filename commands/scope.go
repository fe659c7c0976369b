package commands

import "context"

// A call's scope: who a proposal is made for, as opposed to how it is
// proposed (Options). It is request-scoped data that crosses API layers on
// its way to the Proposer, so it travels in the context; Prepare is its
// one reader.
//   - A leader routine's decision term and its routine mark: the raft node
//     puts both into the context it runs its routines under, so every
//     proposal a routine makes is fenced by the term it was started in
//     and waits for room in a full queue instead of being refused.
//   - The caller's node credential: the API server puts it into the call's
//     context once it has checked that the caller may speak for the
//     session the call names.
type scope struct {
	decisionTerm uint64
	callerNode   uint64
	routine      bool
}

type scopeKey struct{}

func scopeOf(ctx context.Context) scope {
	s, _ := ctx.Value(scopeKey{}).(scope)
	return s
}

func withScope(ctx context.Context, f func(*scope)) context.Context {
	s := scopeOf(ctx)
	f(&s)
	return context.WithValue(ctx, scopeKey{}, s)
}

// WithDecisionTerm returns ctx marked with the raft term in which a leader
// routine makes its decisions (the term it was started in). A command
// proposed with such a context and no LeaderTerm of its own carries that
// term, so Apply refuses it once a newer leader has established itself,
// however long the routine took to notice it was deposed.
func WithDecisionTerm(ctx context.Context, term uint64) context.Context {
	return withScope(ctx, func(s *scope) { s.decisionTerm = term })
}

// DecisionTerm returns the term WithDecisionTerm put into ctx, or 0.
func DecisionTerm(ctx context.Context) uint64 { return scopeOf(ctx).decisionTerm }

// WithLeaderRoutine returns ctx marked as the context of a leader routine
// started in term: its proposals carry term as their decision term
// (WithDecisionTerm) and wait for room in a full proposal queue instead of
// being refused. Routines propose little (a timestamp window, an ack, a
// node marked down) and must not be shut out by a client flood; every
// client call's context lacks the mark. term 0 marks the routine without a
// decision term (leadership establishment, before its term is settled).
func WithLeaderRoutine(ctx context.Context, term uint64) context.Context {
	return withScope(ctx, func(s *scope) {
		s.routine = true
		if term != 0 {
			s.decisionTerm = term
		}
	})
}

// WithCallerNode returns ctx marked with the node identity of the
// authenticated node credential a call comes from (the API server sets it
// once it has checked that the caller may speak for the session the call
// names). A command proposed with such a context and no CallerNode of its
// own carries it, and Apply refuses the command if it speaks for a session
// bound to another identity (docs/security.md#per-node-identity).
func WithCallerNode(ctx context.Context, node uint64) context.Context {
	return withScope(ctx, func(s *scope) { s.callerNode = node })
}

// CallerNode returns the node identity WithCallerNode put into ctx, or 0.
func CallerNode(ctx context.Context) uint64 { return scopeOf(ctx).callerNode }
