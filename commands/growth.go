package commands

import (
	"strings"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// growth says, for every command type, whether it adds to the state without
// bound: the commands the memory guard refuses once the state is at its
// budget (docs/operations.md#memory-guard). Everything else passes, because
// it frees state (drops, prunes, revocations), keeps acknowledged data safe
// (flushes, seals, binlog saves, checkpoints, acks, manifest commits of
// existing segments) or keeps the cluster running (heartbeats,
// registrations, assignments, leadership, allocator windows). The table
// lists every type in registry (a test holds the two equal), so a new
// command cannot pass the guard by being forgotten.
type growth uint8

const (
	keeps growth = iota + 1 // never refused by the guard
	grows                   // refused at the budget
	// growsByBody: refused at the budget unless the body frees or protects
	// data (growsBody decides).
	growsByBody
)

var growthTable = map[Type]growth{
	TypeLeaderEstablished:    keeps,
	TypeUpsertMember:         keeps, // a raft member's address: bounded by the voters
	TypeRemoveMember:         keeps,
	TypeExtendTSOWindow:      keeps, // fixed-size allocator fields
	TypeReserveIDs:           keeps,
	TypeRaiseAllocatorFloors: keeps,

	// PChannels are the configured set the balancer creates on its own;
	// refusing them would fail its rounds, and with them the reassignment
	// of channels after a node failure. Their number is bounded by
	// configuration, not by clients.
	TypeInitStreaming:                keeps,
	TypeAddPChannels:                 keeps,
	TypeAssignPChannels:              keeps,
	TypeAssignPChannelsDone:          keeps,
	TypeMarkPChannelsUnavailable:     keeps,
	TypeRecordAssignFailure:          keeps,
	TypeRegisterStreamingNode:        keeps, // one record per streaming-node session: bounded by the fleet
	TypeMarkStreamingNodeDown:        keeps,
	TypeSetStreamingNodeDrain:        keeps,
	TypeAllocVirtualChannels:         grows, // a new collection's VChannels
	TypeDropVirtualChannels:          keeps,
	TypeUpdateReplicateConfiguration: keeps,
	TypeResetReplicateRole:           keeps,

	TypeCreateBroadcast:          growsByBody,
	TypeAckBroadcast:             keeps,
	TypeCompleteBroadcast:        keeps,
	TypeAbandonBroadcast:         keeps,
	TypePruneBroadcastTombstones: keeps,

	TypeCreateSegment:            grows,
	TypeSealSegments:             keeps,
	TypeMarkSegmentsFlushing:     keeps,
	TypeSaveBinlogPaths:          keeps, // a flush of data already written: refusing it would lose it
	TypeUpdateChannelCheckpoints: keeps,
	TypePruneDroppedSegments:     keeps,
	TypePruneDroppedVChannels:    keeps,
	TypeCreateImportSegment:      grows,
	TypeFinishImportSegment:      keeps,

	TypeCommitSegmentManifests:  keeps,
	TypeRetireManifestRevisions: keeps,
	TypeCreateToken:             growsByBody,
	TypeRevokeToken:             keeps,
}

// Grows reports whether c adds to the state in a way the memory guard
// refuses at the budget (growthTable). A type the table does not know (an
// ignorable command of a newer binary) grows: refusing is the safe side.
func Grows(c Command) bool {
	switch growthTable[c.Type] {
	case keeps:
		return false
	case growsByBody:
		return growsBody(c.Body)
	}
	return true
}

// growsBody decides the types whose growth depends on the body.
func growsBody(body any) bool {
	switch b := body.(type) {
	case *logpb.CreateBroadcast:
		// A broadcast task is a record until it is a pruned tombstone;
		// one that drops or flushes is how an operator frees state and
		// protects data, so it passes. Message types are the clients'
		// vocabulary: every Drop* (DropCollection, DropPartition,
		// DropDatabase, ...) and Flush* passes, and the replication
		// configuration, which is bounded.
		mt := b.GetMessageType()
		return !strings.HasPrefix(mt, "Drop") && !strings.HasPrefix(mt, "Flush") && mt != vocab.MsgAlterReplicateConfig
	case *logpb.CreateToken:
		// The bootstrap admin token is how an operator gets in to free
		// state on a secure cluster; it is installed once.
		return !b.GetToken().GetBootstrap()
	}
	return true
}
