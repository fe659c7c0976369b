// Package allocator serves coordd's timestamp oracle and global ID
// allocator from leader memory.
//
// Both allocators hand out values from a window whose upper bound is
// committed through raft before any value in it is used:
//   - TSO: the committed limit is a physical time in ms. A leader starts at
//     max(now, committed limit), commits limit = start + window, and never
//     hands out a timestamp whose physical part reaches the limit. A new
//     leader therefore starts above everything any earlier leader handed out.
//   - IDs: the leader reserves a range with ReserveIDs; a range is never
//     reserved twice, and ranges grow with log order.
//
// Callers take values without a lock while the current window holds them:
// an atomic add on the ID window's counter, a compare-and-swap on the TSO
// window's position; only a call the window cannot serve takes the
// allocator's lock, and it moves the window with the same atomic
// operation, so no value is taken twice.
//
// Neither makes callers wait for raft while values are left: the TSO's
// leader routine extends the window a second before it runs out without
// holding the allocator's lock, and the ID allocator reserves the next
// range in the background once half of the current one is used, moving
// callers into it when the current one runs out. Only a caller that finds
// nothing committed (the first call of a term, a burst past both windows,
// a count above the batch) waits for a commit.
//
// A deposed leader may not know it is deposed, so every answer waits for a
// leadership check (a quorum round that started after the values were
// taken): a value is returned only if no newer leader existed when the call
// began, so values increase in real-time order across failovers.
package allocator

import (
	"context"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/fsm"
)

// Leader is what the allocators need from the raft node. raftnode.Node
// implements it.
type Leader interface {
	// EstablishedTerm is the raft term this node leads in once it has
	// committed LeaderEstablished for it, or 0 when it does not lead (or not
	// yet). It may drop to 0 at any moment; a non-zero value is a hint, not a
	// lease (docs/architecture.md#leader-routines).
	EstablishedTerm() uint64
	// State is the newest state applied on this node: immutable, never nil,
	// and possibly behind the leader's commit index. Guards that matter run
	// again inside Apply, so a decision read from it may be stale but never
	// unsafe.
	State() *fsm.State
	// Propose commits a command; see commands.Proposer for its error
	// contract. Callers' window extensions and reservations go through it
	// fenced by their term (commands.Fenced); the TSO's routine proposes
	// through the proposer raftnode hands it instead (TSO.Run).
	commands.Proposer
	// VerifyLeader confirms leadership with a quorum round that started after
	// the call: nil means no other leader had been elected when the call
	// began, so values taken before it may be handed out
	// (docs/architecture.md#linearizable-reads).
	VerifyLeader(ctx context.Context) error
}
