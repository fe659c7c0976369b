package commands

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
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

// RecordedMessage is the refusal's text as Apply recorded it (in the dedup
// table and snapshots), for layers that may not import this package.
func (e *RejectedError) RecordedMessage() string { return e.Message }

// Is makes errors.Is hold for ErrInvalid when Apply refused the command as
// REJECT_INVALID, for the sentinel of its code's class (RejectClass), and
// for a target *RejectedError with the same Code. The last lets a package
// name one class of refusal as a sentinel of this type
// (broadcaster.ErrNotPrimary) that matches Apply's refusals of that class
// and its own fail-fast refusals alike.
func (e *RejectedError) Is(target error) bool {
	if target == ErrInvalid {
		return e.Code == logpb.RejectCode_REJECT_INVALID
	}
	if c := RejectClass(e.Code); c != 0 && target == c.Sentinel() {
		return true
	}
	t, ok := target.(*RejectedError)
	return ok && t.Code == e.Code
}

// rejectClasses is the error class of each rejection code
// (docs/semantics.md#error-classes). A capacity refusal is deterministic on
// the current state (asking again gets the same answer), so it is a
// precondition, not "exhausted, retry later"; a conflicting request is one
// the state does not allow, and a stale or out-of-order one raced a newer
// state.
var rejectClasses = map[logpb.RejectCode]vocab.Class{
	logpb.RejectCode_REJECT_INVALID:     vocab.ClassInvalid,
	logpb.RejectCode_REJECT_NOT_FOUND:   vocab.ClassNotFound,
	logpb.RejectCode_REJECT_CONFLICT:    vocab.ClassPrecondition,
	logpb.RejectCode_REJECT_STALE:       vocab.ClassConflict,
	logpb.RejectCode_REJECT_EXHAUSTED:   vocab.ClassPrecondition,
	logpb.RejectCode_REJECT_NOT_PRIMARY: vocab.ClassPrecondition,
	logpb.RejectCode_REJECT_PERMISSION:  vocab.ClassPermission,
	logpb.RejectCode_REJECT_ORDER:       vocab.ClassConflict,
}

// RejectClass is the error class of a rejection code (0 for a code it does
// not know: an unclassified refusal, which the API answers as Internal).
func RejectClass(c logpb.RejectCode) vocab.Class { return rejectClasses[c] }

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
