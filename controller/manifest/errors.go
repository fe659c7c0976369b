package manifest

import (
	"context"
	"errors"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// The error classes of a manifest commit (docs/semantics.md#manifest-errors).
// api/grpcserver's error table maps them: stale → Aborted, not found →
// NotFound, invalid (commands.ErrInvalid: the request is malformed or the
// segment cannot take it) → InvalidArgument.
var (
	// ErrNotFound: the segment does not exist or is Dropped (terminal:
	// discard the work). It is a refusal of class REJECT_NOT_FOUND, so
	// errors.Is matches it for the committer's own checks and for Apply's
	// refusal alike.
	ErrNotFound error = &commands.RejectedError{Code: logpb.RejectCode_REJECT_NOT_FOUND, Message: "segment not found"}
	// ErrNoStore: this member has no object store configured.
	ErrNoStore = vocab.NewSentinel(vocab.ClassPrecondition, "manifest commits need an object store (coordd --object-store)")

	// errUnchecked: a zero Request (not built by NewRequest or NewBatch),
	// refused as commands.Proposer refuses a command not built by
	// commands.New.
	errUnchecked = vocab.Errorf(commands.ErrInvalid, "a manifest commit must be built by NewRequest or NewBatch")
)

// StaleError: the commit was built on a pointer that is no longer current
// (retryable after re-reading). Leader-side checks and Apply rejections
// both come back as this type.
type StaleError struct {
	Segment, Expected, Current int64
	Why                        string
}

func (e *StaleError) Error() string {
	return vocab.StaleManifestMessage(e.Segment, e.Expected, e.Current, e.Why)
}

// Is makes a StaleError of class vocab.ClassConflict.
func (e *StaleError) Is(target error) bool { return target == vocab.ErrConflict }

// staleOf turns Apply's REJECT_STALE refusal of a commit into a
// *StaleError; any other error comes back as it is (a refusal stays the
// *commands.RejectedError commands.Commit made, which errors.Is matches
// against commands.ErrInvalid and ErrNotFound by its code).
func staleOf(err error) error {
	var rej *commands.RejectedError
	if !errors.As(err, &rej) || rej.Code != logpb.RejectCode_REJECT_STALE {
		return err
	}
	if seg, exp, cur, ok := vocab.ParseStaleManifest(rej.Message); ok {
		return &StaleError{Segment: seg, Expected: exp, Current: cur, Why: "refused by the state machine"}
	}
	// A decision-term fence: a newer leader established itself.
	return &StaleError{Expected: -1, Current: -1, Why: rej.Message}
}

func invalidf(format string, args ...any) error {
	return vocab.Errorf(commands.ErrInvalid, format, args...)
}

// Class names an error's outcome class (metrics, CLI): ok, stale,
// not_found, invalid, canceled or error.
func Class(err error) string {
	var stale *StaleError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &stale):
		return "stale"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, commands.ErrInvalid):
		return "invalid"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}

// ErrInvalidSegment is the error for a segment ID that is not positive.
func ErrInvalidSegment(id int64) error { return invalidf("segment_id must be positive, got %d", id) }
