package raftnode

import (
	lead "github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/vocab"
)

// The leadership errors are leadership's, so that layers above can test for
// them without importing this package; the names here are the same values.
var (
	// ErrNotLeader is leadership.ErrNotLeader, always wrapped in a
	// *NotLeaderError carrying the leader hint.
	ErrNotLeader = lead.ErrNotLeader
	// ErrOutcomeUnknown is leadership.ErrOutcomeUnknown.
	ErrOutcomeUnknown = lead.ErrOutcomeUnknown
	// ErrNotEstablished is leadership.ErrNotEstablished.
	ErrNotEstablished = lead.ErrNotEstablished
	// ErrShuttingDown: the node is stopping.
	ErrShuttingDown = vocab.NewSentinel(vocab.ClassUnavailable, "node is shutting down")
)

// NotLeaderError is leadership.NotLeaderError.
type NotLeaderError = lead.NotLeaderError
