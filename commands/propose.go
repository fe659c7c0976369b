package commands

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// Proposer commits commands: the raft node, or a test's fake of it.
type Proposer interface {
	// Propose commits c (built by New) and returns its result once applied.
	Propose(ctx context.Context, c Command) (*logpb.Result, error)
}

// Propose builds body with New and proposes it with p. A validation error
// comes back before anything is proposed.
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
