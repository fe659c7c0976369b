package manifest

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// The error classes of a manifest commit (docs/semantics.md#manifest-errors).
// api/grpcserver's error table maps them: stale → Aborted, not found →
// NotFound, invalid → InvalidArgument.
var (
	// ErrInvalid: the request is malformed or the segment cannot take it.
	ErrInvalid = errors.New("invalid manifest commit")
	// ErrNotFound: the segment does not exist or is Dropped (terminal:
	// discard the work).
	ErrNotFound = errors.New("segment not found")
	// ErrNoStore: this member has no object store configured.
	ErrNoStore = errors.New("manifest commits need an object store (coordd --object-store)")
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

// RejectedError is an Apply rejection of the commit command that is not
// stale (stale ones are *StaleError).
type RejectedError struct {
	Code    logpb.RejectCode
	Message string
}

func (e *RejectedError) Error() string { return e.Message }

// Is lets errors.Is match the class sentinels.
func (e *RejectedError) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return e.Code == logpb.RejectCode_REJECT_INVALID
	case ErrNotFound:
		return e.Code == logpb.RejectCode_REJECT_NOT_FOUND
	}
	return false
}

// rejectionError converts an Apply rejection into the class errors.
func rejectionError(r *logpb.Rejection) error {
	if r.Code == logpb.RejectCode_REJECT_STALE {
		if seg, exp, cur, ok := vocab.ParseStaleManifest(r.Message); ok {
			return &StaleError{Segment: seg, Expected: exp, Current: cur, Why: "refused by the state machine"}
		}
		// A decision-term fence: a newer leader established itself.
		return &StaleError{Expected: -1, Current: -1, Why: r.Message}
	}
	return &RejectedError{Code: r.Code, Message: r.Message}
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
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
	case errors.Is(err, ErrInvalid), errors.Is(err, commands.ErrInvalid):
		return "invalid"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}

// ErrInvalidSegment is the error for a segment ID that is not positive.
func ErrInvalidSegment(id int64) error { return invalidf("segment_id must be positive, got %d", id) }
