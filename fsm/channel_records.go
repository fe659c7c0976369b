package fsm

import (
	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands/logpb"
)

// ChannelRecords identifies a state's channel records: its PChannels, its
// streaming nodes and its collections' VChannels. Values compare with ==.
//
// Invariant: two states with equal ChannelRecords hold the same records.
// The maps are persistent, so every Set or Delete builds a new map and
// the identity moves; a command that touches none of them (a manifest
// commit, an allocation, a broadcast) keeps it. The converse does not
// hold: a change that is undone, or a snapshot restore, gives a new
// identity for the same records, which only costs a reader a recompute.
//
// Unlike AssignmentVersion, which counts only the changes watchers observe,
// it moves on every change: AddPChannels, RecordAssignFailure and the
// eviction of DOWN nodes keep the version but not the identity. A reader
// that derives something from these records (the balancer's plan) may
// skip the work while the identity is unchanged.
type ChannelRecords struct {
	pchannels   *immutable.SortedMap[string, *logpb.PChannelRecord]
	nodes       *immutable.SortedMap[uint64, *logpb.StreamingNodeRecord]
	collections *immutable.SortedMap[int64, *logpb.CollectionVChannels]
}

// ChannelRecords returns the identity of s's channel records.
func (s *State) ChannelRecords() ChannelRecords {
	return ChannelRecords{pchannels: s.ch.pchannels, nodes: s.ch.nodes, collections: s.ch.collections}
}
