package fsm

import (
	"github.com/benbjohnson/immutable"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// Limits of the channel subsystem; exceeding one is a deterministic
// rejection.
const (
	MaxPChannels = 65536
	// MaxDownNodes bounds the DOWN streaming-node records kept so watchers
	// can learn about them through deltas; older ones are evicted (oldest
	// node ID first) and the delta floor moves up.
	MaxDownNodes = 1024
	// MaxCollections bounds collections with allocated vchannels.
	MaxCollections = 1 << 20
)

// channelsState is the channel-management subsystem
// (docs/semantics.md#pchannels): PChannels and their assignment, streaming
// nodes, VChannels per collection and the replication configuration. Records
// are immutable once stored.
type channelsState struct {
	meta        *logpb.ChannelsMeta
	pchannels   *immutable.SortedMap[string, *logpb.PChannelRecord]
	nodes       *immutable.SortedMap[uint64, *logpb.StreamingNodeRecord]
	collections *immutable.SortedMap[int64, *logpb.CollectionVChannels]
	// vcount is derived: vchannels per pchannel (rebuilt on restore).
	vcount *immutable.SortedMap[string, int]
}

func newChannelsState() channelsState {
	return channelsState{
		meta:        &logpb.ChannelsMeta{NextNodeId: 1},
		pchannels:   immutable.NewSortedMap[string, *logpb.PChannelRecord](nil),
		nodes:       immutable.NewSortedMap[uint64, *logpb.StreamingNodeRecord](immutable.NewComparer[uint64](0)),
		collections: immutable.NewSortedMap[int64, *logpb.CollectionVChannels](immutable.NewComparer[int64](0)),
		vcount:      immutable.NewSortedMap[string, int](nil),
	}
}

// AssignmentVersion is the (Global, Local) version of the channel view:
// Global is the term in which the current leader established itself, Local
// counts observable changes since. Pairs compare lexicographically.
type AssignmentVersion struct{ Global, Local uint64 }

// Less orders versions lexicographically.
func (v AssignmentVersion) Less(o AssignmentVersion) bool {
	return v.Global < o.Global || v.Global == o.Global && v.Local < o.Local
}

// Proto converts the version to its wire form.
func (v AssignmentVersion) Proto() *logpb.AssignmentVersion {
	return &logpb.AssignmentVersion{Global: v.Global, Local: v.Local}
}

// VersionOf converts a wire version (nil is the zero version).
func VersionOf(p *logpb.AssignmentVersion) AssignmentVersion {
	return AssignmentVersion{Global: p.GetGlobal(), Local: p.GetLocal()}
}

// AssignmentVersion is the current version of the channel view.
func (s *State) AssignmentVersion() AssignmentVersion {
	return AssignmentVersion{Global: s.leader.term, Local: s.ch.meta.VersionLocal}
}

// DeltaFloor: a watcher holding a version older than this needs a full view.
func (s *State) DeltaFloor() AssignmentVersion { return VersionOf(s.ch.meta.DeltaFloor) }

// ChannelsMeta returns the subsystem's singleton record (shared; read only).
func (s *State) ChannelsMeta() *logpb.ChannelsMeta { return s.ch.meta }

// StreamingInitialized reports whether InitStreaming has been applied.
func (s *State) StreamingInitialized() bool { return s.ch.meta.Initialized }

// CChannel is the control channel's name ("" before InitStreaming).
func (s *State) CChannel() string { return s.ch.meta.Cchannel }

// PChannels returns every PChannel sorted by name (shared records).
func (s *State) PChannels() []*logpb.PChannelRecord {
	out := make([]*logpb.PChannelRecord, 0, s.ch.pchannels.Len())
	for it := s.ch.pchannels.Iterator(); !it.Done(); {
		_, p, _ := it.Next()
		out = append(out, p)
	}
	return out
}

// PChannel looks up one PChannel.
func (s *State) PChannel(name string) (*logpb.PChannelRecord, bool) { return s.ch.pchannels.Get(name) }

// PChannelCount is the number of PChannels.
func (s *State) PChannelCount() int { return s.ch.pchannels.Len() }

// StreamingNodes returns every node record (including DOWN ones still
// kept), sorted by ID.
func (s *State) StreamingNodes() []*logpb.StreamingNodeRecord {
	out := make([]*logpb.StreamingNodeRecord, 0, s.ch.nodes.Len())
	for it := s.ch.nodes.Iterator(); !it.Done(); {
		_, n, _ := it.Next()
		out = append(out, n)
	}
	return out
}

// StreamingNode looks up one node.
func (s *State) StreamingNode(id uint64) (*logpb.StreamingNodeRecord, bool) {
	return s.ch.nodes.Get(id)
}

// VChannelCount is the number of VChannels placed on a PChannel.
func (s *State) VChannelCount(pchannel string) int {
	n, _ := s.ch.vcount.Get(pchannel)
	return n
}

// Collections returns every collection's VChannels sorted by collection ID.
func (s *State) Collections() []*logpb.CollectionVChannels {
	out := make([]*logpb.CollectionVChannels, 0, s.ch.collections.Len())
	for it := s.ch.collections.Iterator(); !it.Done(); {
		_, c, _ := it.Next()
		out = append(out, c)
	}
	return out
}

// Collection looks up one collection's VChannels.
func (s *State) Collection(id int64) (*logpb.CollectionVChannels, bool) {
	return s.ch.collections.Get(id)
}

// ReplicateConfiguration returns the current replication configuration
// (nil when none).
func (s *State) ReplicateConfiguration() *logpb.ReplicateConfiguration {
	return s.ch.meta.ReplicateConfig
}

// AvailableInReplication: true with no replication configuration or when
// this cluster is not part of it; otherwise true iff the configuration
// lists the PChannel for this cluster.
func (s *State) AvailableInReplication(pchannel string) bool {
	cl := s.ownReplicateCluster()
	if cl == nil {
		return true
	}
	for _, p := range cl.Pchannels {
		if p == pchannel {
			return true
		}
	}
	return false
}

// IsPrimary: a cluster is secondary iff the configuration's topology names
// it as the target of an edge.
func (s *State) IsPrimary() bool {
	cfg := s.ch.meta.ReplicateConfig
	if cfg == nil {
		return true
	}
	for _, e := range cfg.Topology {
		if e.TargetClusterId == s.ch.meta.ClusterId {
			return false
		}
	}
	return true
}

func (s *State) ownReplicateCluster() *logpb.ReplicateCluster {
	cfg := s.ch.meta.ReplicateConfig
	if cfg == nil {
		return nil
	}
	for _, cl := range cfg.Clusters {
		if cl.ClusterId == s.ch.meta.ClusterId {
			return cl
		}
	}
	return nil
}

// ---- mutation helpers (used only by apply functions) -----------------------

// bumpVersion records an observable change and returns the new version.
func (next *State) bumpVersion() AssignmentVersion {
	m := proto.Clone(next.ch.meta).(*logpb.ChannelsMeta)
	m.VersionLocal++
	next.ch.meta = m
	return next.AssignmentVersion()
}

func (next *State) setMeta(mutate func(m *logpb.ChannelsMeta)) {
	m := proto.Clone(next.ch.meta).(*logpb.ChannelsMeta)
	mutate(m)
	next.ch.meta = m
}

// putPChannel stores p stamped with the current version.
func (next *State) putPChannel(p *logpb.PChannelRecord) {
	v := next.AssignmentVersion()
	p.VersionGlobal, p.VersionLocal = v.Global, v.Local
	next.ch.pchannels = next.ch.pchannels.Set(p.Name, p)
}

// putNode stores n stamped with the current version.
func (next *State) putNode(n *logpb.StreamingNodeRecord) {
	v := next.AssignmentVersion()
	n.VersionGlobal, n.VersionLocal = v.Global, v.Local
	next.ch.nodes = next.ch.nodes.Set(n.Id, n)
}

func clonePChannel(p *logpb.PChannelRecord) *logpb.PChannelRecord {
	return proto.Clone(p).(*logpb.PChannelRecord)
}

func cloneNode(n *logpb.StreamingNodeRecord) *logpb.StreamingNodeRecord {
	return proto.Clone(n).(*logpb.StreamingNodeRecord)
}
