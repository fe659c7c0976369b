package fsm

import (
	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands/logpb"
)

// State is one immutable version of the replicated state. Readers may hold
// a *State for as long as they like; nothing will change under them.
type State struct {
	applied uint64
	cluster clusterState
	alloc   allocState
	leader  leadershipState
	dedup   dedupTable
	ch      channelsState
	bc      broadcastState
	seg     segmentsState
	mf      manifestState
	tok     tokensState
}

// clusterState holds the client-facing addresses of raft members. Membership
// itself (voters, suffrage) is raft's configuration; this is the directory
// that lets any node describe the cluster and forward to the leader.
type clusterState struct {
	members *immutable.SortedMap[string, *logpb.Member]
}

// allocState is the committed part of the allocators: the upper bound of the
// leader's timestamp window and the first ID no leader has reserved yet.
type allocState struct {
	tsoLimitPhysicalMs int64
	nextID             uint64
}

// leadershipState records the last leader that established itself.
type leadershipState struct {
	term          uint64
	leaderID      string
	establishedMs int64
}

// New returns the empty state every replica starts from.
func New() *State {
	return &State{
		cluster: clusterState{members: immutable.NewSortedMap[string, *logpb.Member](nil)},
		alloc:   allocState{nextID: 1},
		dedup:   newDedupTable(),
		ch:      newChannelsState(),
		bc:      newBroadcastState(),
		seg:     newSegmentsState(),
		mf:      newManifestState(),
		tok:     newTokensState(),
	}
}

// AppliedIndex is the raft index of the last entry applied to this state.
func (s *State) AppliedIndex() uint64 { return s.applied }

// Members returns every recorded member, sorted by ID. The records are
// shared and must not be modified.
func (s *State) Members() []*logpb.Member {
	out := make([]*logpb.Member, 0, s.cluster.members.Len())
	for it := s.cluster.members.Iterator(); !it.Done(); {
		_, m, _ := it.Next()
		out = append(out, m)
	}
	return out
}

// Member looks up one member's record.
func (s *State) Member(id string) (*logpb.Member, bool) {
	return s.cluster.members.Get(id)
}

// TSOLimitPhysicalMs is the committed upper bound (exclusive) of the physical
// part of every timestamp any leader may have handed out.
func (s *State) TSOLimitPhysicalMs() int64 { return s.alloc.tsoLimitPhysicalMs }

// NextID is the first global ID no leader has reserved.
func (s *State) NextID() uint64 { return s.alloc.nextID }

// EstablishedTerm is the raft term of the last leader that committed
// LeaderEstablished; it is the Global part of versioned views.
func (s *State) EstablishedTerm() uint64 { return s.leader.term }

// EstablishedLeader is the ID of that leader and when it established itself.
func (s *State) EstablishedLeader() (id string, atUnixMs int64) {
	return s.leader.leaderID, s.leader.establishedMs
}

// DedupLen is the number of request IDs remembered.
func (s *State) DedupLen() int { return s.dedup.byID.Len() }

// LookupRequest returns the recorded result of a request ID, if remembered.
func (s *State) LookupRequest(requestID string) (*logpb.Result, bool) {
	e, ok := s.dedup.byID.Get(requestID)
	if !ok {
		return nil, false
	}
	return e.Result, true
}
