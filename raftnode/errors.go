package raftnode

import (
	"errors"
	"fmt"
)

var (
	// ErrNotLeader: this node cannot serve the request; nothing was done.
	// It is always wrapped in a *NotLeaderError carrying the leader hint.
	ErrNotLeader = errors.New("not the leader")
	// ErrOutcomeUnknown: the command may or may not have been committed
	// (leadership lost mid-flight, shutdown, or the caller's deadline).
	// Retrying with the same request ID is safe.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrShuttingDown: the node is stopping.
	ErrShuttingDown = errors.New("node is shutting down")
	// ErrNotEstablished: the leader has not yet committed an entry of its
	// own term, so it cannot serve linearizable reads or proposals yet.
	ErrNotEstablished = errors.New("leader not yet established in its term")
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

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
