package commands

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// RejectedError is Apply's refusal of a command (a logpb.Rejection) as a Go
// error: every replica refused it identically and nothing changed
// (docs/semantics.md#error-classes). It is the one form a refusal takes
// above the FSM; the API maps its Code to a status with one table.
type RejectedError struct {
	Code    logpb.RejectCode
	Message string
}

func (e *RejectedError) Error() string { return e.Message }

// Is makes errors.Is hold for ErrInvalid when Apply refused the command as
// REJECT_INVALID, and for a target *RejectedError with the same Code. The
// second lets a package name one class of refusal as a sentinel of this
// type (broadcaster.ErrNotPrimary) that matches Apply's refusals of that
// class and its own fail-fast refusals alike.
func (e *RejectedError) Is(target error) bool {
	if target == ErrInvalid {
		return e.Code == logpb.RejectCode_REJECT_INVALID
	}
	t, ok := target.(*RejectedError)
	return ok && t.Code == e.Code
}

// Rejected returns r as a *RejectedError, or nil when r is nil (the
// command was accepted).
func Rejected(r *logpb.Rejection) error {
	if r == nil {
		return nil
	}
	return &RejectedError{Code: r.Code, Message: r.Message}
}

// Commit proposes c with p and folds the two ways a proposal fails into its
// error: p's own error comes back unchanged (its contract is Proposer's:
// nothing done, or the outcome unknown), and Apply's refusal comes back as
// a *RejectedError. A nil error means c was applied and accepted; with an
// error there is no result.
func Commit(ctx context.Context, p Proposer, c Command, opts ...Option) (*logpb.Result, error) {
	res, err := p.Propose(ctx, c, opts...)
	if err != nil {
		return nil, err
	}
	if err := Rejected(res.GetRejection()); err != nil {
		return nil, err
	}
	return res, nil
}

// CommitNew builds body with New and commits it with Commit. A validation
// error (ErrInvalid, ErrTooLarge) comes back before anything is proposed.
func CommitNew(ctx context.Context, p Proposer, body proto.Message, requestID string, opts ...Option) (*logpb.Result, error) {
	c, err := New(body, requestID)
	if err != nil {
		return nil, err
	}
	return Commit(ctx, p, c, opts...)
}
