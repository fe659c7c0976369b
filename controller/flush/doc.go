// Package flush is the leader's half of the write path
// (docs/semantics.md#segments): segment allocation, seal policies, and the
// time-tick watermark that decides when a sealed segment may be flushed.
//
// Allocations and time ticks are leader memory: they change many times a
// second and only the decisions they lead to go through the log — a new
// segment (CreateSegment), a seal (SealSegments), a flush order
// (MarkSegmentsFlushing). The memory belongs to one leader term; a new
// leader starts empty and, because it cannot know the allocations its
// predecessor handed out, treats every segment as allocated until one
// expiry period after it took over.
//
// Decide is the pure seal policy: (view, now) → decisions; the routine only
// gathers the view, asks the TSO for the seal time and proposes.
package flush

import (
	"context"
	"fmt"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/vocab"
)

// Leader is what the manager needs from the raft node.
type Leader interface {
	// EstablishedTerm is the term this node leads in (0: not leading).
	EstablishedTerm() uint64
	// State is the newest applied state (immutable, never nil).
	State() *fsm.State
	// Propose commits a command (see commands.Proposer).
	commands.Proposer
}

// TSO hands out timestamps (the leader's timestamp oracle).
type TSO interface {
	// AllocVia hands out count timestamps, proposing a window extension
	// the call needs through p (allocator.TSO.AllocVia): a seal round of
	// the leader routine passes the routine's proposer.
	AllocVia(ctx context.Context, count uint32, p commands.Proposer) (uint64, error)
	// PhysicalMs is the physical part of the timestamp AllocVia would hand
	// out now, without handing it out (allocator.TSO.PhysicalMs).
	PhysicalMs() int64
}

// Clock is the time source (a fake one in tests, see
// controller/controllertest).
type Clock = clockwork.Clock

// Errors of the write path the API maps to status codes.
var (
	// ErrNotLeader: this node does not lead (established) right now. It is
	// leadership.ErrNotLeader, so the API has one "not leader" row.
	ErrNotLeader = fmt.Errorf("flush: %w", leadership.ErrNotLeader)
	// ErrNotOwner: the caller's (node, PChannel term) is not the current
	// assignment of the VChannel's PChannel.
	ErrNotOwner = vocab.NewSentinel(vocab.ClassConflict, "not the channel owner")
	// ErrInvalid: a request that is wrong whatever the state. It is
	// commands.ErrInvalid, the one "invalid" sentinel, so the API has one
	// InvalidArgument row.
	ErrInvalid = commands.ErrInvalid
	// ErrNotFound: the collection or VChannel does not exist. It is the
	// class's own sentinel, vocab.ErrNotFound.
	ErrNotFound = vocab.ErrNotFound
)
