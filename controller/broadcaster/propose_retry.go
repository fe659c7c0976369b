package broadcaster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
)

// Proposing a broadcast's commands again while their outcome is unknown,
// under the request ID that makes a repeat find the first result.

// proposeRetrying commits cmd with opts through p (commands.Commit: a
// refusal is a *commands.RejectedError) and, while the outcome is unknown
// and ctx lives, proposes it again (the FSM returns the first result for a
// repeated request ID).
//
// Once an attempt's outcome was unknown, the call's outcome stays unknown
// unless a later attempt learns it: a result or a refusal that went
// through Apply (the FSM answers a repeated request ID with the first
// result) is the answer, but a later attempt's own "nothing done" (this
// node no longer leads, it shuts down, ctx ended) says nothing about the
// earlier attempt, so the error returned then still wraps
// leadership.ErrOutcomeUnknown (docs/semantics.md#error-classes).
func (m *Manager) proposeRetrying(ctx context.Context, p commands.Proposer, cmd commands.Command, opts ...commands.Option) (*logpb.Result, error) {
	backoff := m.cfg.BackoffInitial
	var unknown error // the first attempt whose outcome was unknown
	for {
		res, err := commands.Commit(ctx, p, cmd, opts...)
		if err == nil {
			return res, nil
		}
		if errors.Is(err, leadership.ErrOutcomeUnknown) && unknown == nil {
			unknown = err
		}
		if !errors.Is(err, leadership.ErrOutcomeUnknown) || ctx.Err() != nil {
			return nil, keepUnknown(unknown, err)
		}
		m.log.Warn("broadcast proposal outcome unknown; retrying with the same request id", "request_id", cmd.RequestID, "error", err)
		wait := m.cfg.Clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, err
		case <-wait.Chan():
		}
		backoff = min(2*backoff, m.cfg.BackoffMax)
	}
}

// keepUnknown is the error of a retried proposal whose last attempt failed
// with last: last itself when it already wraps leadership.ErrOutcomeUnknown,
// when it is a refusal Apply made (it answers for the request ID, see
// proposeRetrying), or when no attempt's outcome was unknown. Otherwise it
// is the earlier unknown outcome, which last cannot undo, with last's text
// only: last's own class ("not the leader": nothing done) must not reach
// errors.Is, or a caller would read it as the call's outcome.
func keepUnknown(unknown, last error) error {
	var rej *commands.RejectedError
	if unknown == nil || errors.Is(last, leadership.ErrOutcomeUnknown) || errors.As(last, &rej) {
		return last
	}
	return fmt.Errorf("%w (a retry with the same request id then failed: %v)", unknown, last)
}

// newRequestID makes the request ID of a CreateBroadcast, so a retry after
// an unknown outcome cannot create a second task.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "broadcast-create-" + hex.EncodeToString(b[:])
}
