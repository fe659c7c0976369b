// Package leadership names the ways a request can fail because of where
// leadership is: the errors every layer shares, from the raft node through
// the leader routines to the API, which maps each to one gRPC code.
//
// It stands on vocab alone (each error is of vocab.ClassUnavailable), so
// controllers can test for these errors without importing the raft node.
package leadership

import (
	"fmt"

	"github.com/coordd/coordd/vocab"
)

var (
	// ErrNotLeader: this node does not lead an established term, so it
	// cannot serve the request; nothing was done. The raft node wraps it
	// in a *NotLeaderError carrying the leader hint.
	ErrNotLeader = vocab.NewSentinel(vocab.ClassUnavailable, "not the leader")
	// ErrNotEstablished: this node leads but has not yet committed an
	// entry of its own term, so it cannot serve linearizable reads or
	// proposals yet; nothing was done.
	ErrNotEstablished = vocab.NewSentinel(vocab.ClassUnavailable, "leader not yet established in its term")
	// ErrOutcomeUnknown: the command may or may not have been committed
	// (leadership lost mid-flight, shutdown, or the caller's deadline).
	// Retrying with the same request ID is safe.
	ErrOutcomeUnknown = vocab.NewSentinel(vocab.ClassUnavailable, "outcome unknown")
)

// NotLeaderError is ErrNotLeader with the known leader, if any.
type NotLeaderError struct {
	LeaderID   string
	LeaderAddr string // raft address
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "not the leader; no leader is known"
	}
	return fmt.Sprintf("not the leader; leader is %s (%s)", e.LeaderID, e.LeaderAddr)
}

// Unwrap makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
