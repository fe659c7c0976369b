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

// Leader is what the allocators need from the raft node.
type Leader interface {
	// EstablishedTerm is the term this node leads in, or 0.
	EstablishedTerm() uint64
	State() *fsm.State
	commands.Proposer
	VerifyLeader(ctx context.Context) error
}
