package clienttest

import (
	"context"
	"errors"
	"slices"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// ChannelState is the channel-management state the fake serves: what
// ListPChannels, ListNodes and an unscripted WatchAssignments report.
type ChannelState struct {
	CChannel string
	// Version is the assignment version; nil means no view yet (an
	// unscripted WatchAssignments then sends nothing).
	Version   *coordpb.Version
	PChannels []*coordpb.PChannel
	// Nodes are the streaming nodes, DOWN ones included. ListNodes fills
	// each node's pchannels from the ASSIGNED and ASSIGNING PChannels.
	Nodes []*coordpb.StreamingNode
}

// SampleChannelState is a small state: three PChannels (two ASSIGNED to
// node 1, one UNAVAILABLE on node 2) and nodes 1 (UP), 2 (DRAINING) and 3
// (DOWN), at version {3, 7}.
func SampleChannelState() ChannelState {
	return ChannelState{
		CChannel: "by-dev-rootcoord-dml_0_vcchan",
		Version:  &coordpb.Version{Global: 3, Local: 7},
		PChannels: []*coordpb.PChannel{
			{Name: "by-dev-rootcoord-dml_0", Term: 4, State: "ASSIGNED", NodeId: 1, NodeAddress: "127.0.0.1:21001",
				AccessMode: "RW", AvailableInReplication: true, VchannelCount: 2, LastAssignUnixMs: 1_700_000_000_123},
			{Name: "by-dev-rootcoord-dml_1", Term: 2, State: "ASSIGNED", NodeId: 1, NodeAddress: "127.0.0.1:21001",
				AccessMode: "RW", AvailableInReplication: true, VchannelCount: 1, LastAssignUnixMs: 1_700_000_000_456},
			{Name: "by-dev-rootcoord-dml_2", Term: 5, State: "UNAVAILABLE", NodeId: 2, NodeAddress: "127.0.0.1:21002",
				AccessMode: "RW", AvailableInReplication: true, LastAssignUnixMs: 1_700_000_000_789,
				LastError: "wal broken: not the owner", LastErrorUnixMs: 1_700_000_001_000, FailedAttempts: 3},
		},
		Nodes: []*coordpb.StreamingNode{
			{Id: 1, Address: "127.0.0.1:21001", ResourceGroup: "default", State: "UP", Epoch: 1, LastHeartbeatMsAgo: 120},
			{Id: 2, Address: "127.0.0.1:21002", ResourceGroup: "default", State: "DRAINING", Epoch: 2,
				Reason: "operator request", LastHeartbeatMsAgo: 80},
			{Id: 3, Address: "127.0.0.1:21003", ResourceGroup: "rg2", State: "DOWN", Epoch: 1,
				Reason: "session expired", LastHeartbeatMsAgo: -1},
		},
	}
}

// channels is the shared channel state, guarded by Cluster.mu.
type channels struct {
	state       ChannelState
	collections map[int64][]string
	allocs      map[string][]string // request ID → result
	replicate   *coordpb.ReplicateConfiguration
	clusterID   string
	role        string
	reports     []*coordpb.ReportAssignmentErrorRequest
	nextNodeID  uint64
}

func newChannels() channels {
	return channels{collections: map[int64][]string{}, allocs: map[string][]string{},
		clusterID: "by-dev", role: "PRIMARY", nextNodeID: 100}
}

// WatchStream scripts one WatchAssignments call on a node: Updates are sent
// in order, then whatever arrives on Feed until it is closed, then the
// stream ends with End.
type WatchStream struct {
	Updates []*coordpb.AssignmentUpdate
	Feed    <-chan *coordpb.AssignmentUpdate
	// End: nil keeps the stream open until the client leaves; ErrEndStream
	// ends it with status OK (the client sees io.EOF); any other error is
	// returned to the client.
	End error
}

// ErrEndStream as WatchStream.End ends the stream with status OK.
var ErrEndStream = errors.New("clienttest: end the stream with status OK")

// watchState is a node's WatchAssignments script and history, guarded by
// Node.mu.
type watchState struct {
	script []WatchStream
	froms  []*coordpb.Version
	open   int
}

// SetChannelState replaces the channel state (deep copy).
func (c *Cluster) SetChannelState(s ChannelState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ch.state = cloneState(s)
}

// ChannelState returns a deep copy of the channel state.
func (c *Cluster) ChannelState() ChannelState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneState(c.ch.state)
}

// SetReplicateConfiguration sets what GetReplicateConfiguration answers.
func (c *Cluster) SetReplicateConfiguration(cfg *coordpb.ReplicateConfiguration, clusterID, role string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ch.replicate = nil
	if cfg != nil {
		c.ch.replicate = proto.Clone(cfg).(*coordpb.ReplicateConfiguration)
	}
	c.ch.clusterID, c.ch.role = clusterID, role
}

// ReplicateConfiguration returns the last configuration set (by
// UpdateReplicateConfiguration or SetReplicateConfiguration).
func (c *Cluster) ReplicateConfiguration() *coordpb.ReplicateConfiguration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch.replicate == nil {
		return nil
	}
	return proto.Clone(c.ch.replicate).(*coordpb.ReplicateConfiguration)
}

// Reports returns every ReportAssignmentError request received, in order.
func (c *Cluster) Reports() []*coordpb.ReportAssignmentErrorRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*coordpb.ReportAssignmentErrorRequest, len(c.ch.reports))
	for i, r := range c.ch.reports {
		out[i] = proto.Clone(r).(*coordpb.ReportAssignmentErrorRequest)
	}
	return out
}

// Collections returns a copy of the allocated VChannels by collection.
func (c *Cluster) Collections() map[int64][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int64][]string{}
	for id, vs := range c.ch.collections {
		out[id] = slices.Clone(vs)
	}
	return out
}

// ScriptWatch queues scripts for the node's next WatchAssignments calls,
// one per call. A call with no script left sends the full view of the
// channel state (if it has a version) and stays open.
func (n *Node) ScriptWatch(streams ...WatchStream) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.watch.script = append(n.watch.script, streams...)
}

// WatchFroms returns the from_version of each WatchAssignments call the
// node received, in order (nil for a call without one).
func (n *Node) WatchFroms() []*coordpb.Version {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*coordpb.Version, len(n.watch.froms))
	for i, v := range n.watch.froms {
		if v != nil {
			out[i] = proto.Clone(v).(*coordpb.Version)
		}
	}
	return out
}

// OpenWatches returns how many WatchAssignments streams are open on the
// node.
func (n *Node) OpenWatches() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.watch.open
}

func cloneState(s ChannelState) ChannelState {
	out := ChannelState{CChannel: s.CChannel}
	if s.Version != nil {
		out.Version = proto.Clone(s.Version).(*coordpb.Version)
	}
	for _, p := range s.PChannels {
		out.PChannels = append(out.PChannels, proto.Clone(p).(*coordpb.PChannel))
	}
	for _, nd := range s.Nodes {
		out.Nodes = append(out.Nodes, proto.Clone(nd).(*coordpb.StreamingNode))
	}
	return out
}

// heldLocked maps node ID → PChannels it holds or is being given, sorted.
func (c *Cluster) heldLocked() map[uint64][]string {
	out := map[uint64][]string{}
	for _, p := range c.ch.state.PChannels {
		if p.State == "ASSIGNED" || p.State == "ASSIGNING" {
			out[p.NodeId] = append(out[p.NodeId], p.Name)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

func (c *Cluster) nodeLocked(id uint64) *coordpb.StreamingNode {
	for _, nd := range c.ch.state.Nodes {
		if nd.Id == id {
			return nd
		}
	}
	return nil
}

func (c *Cluster) apiNodeLocked(nd *coordpb.StreamingNode) *coordpb.StreamingNode {
	out := proto.Clone(nd).(*coordpb.StreamingNode)
	out.Pchannels = c.heldLocked()[nd.Id]
	return out
}

// bumpLocked advances the assignment version's local part.
func (c *Cluster) bumpLocked() {
	if c.ch.state.Version == nil {
		c.ch.state.Version = &coordpb.Version{Global: 1}
	}
	c.ch.state.Version.Local++
}

// ListPChannels implements coordpb.ChannelsServer.
func (n *Node) ListPChannels(context.Context, *coordpb.ListPChannelsRequest) (*coordpb.ListPChannelsResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s := cloneState(c.ch.state)
	// The owner's state as coordd's leader reports it, unless scripted.
	for _, p := range s.PChannels {
		for _, nd := range s.Nodes {
			if p.OwnerState == "" && p.NodeId != 0 && nd.Id == p.NodeId {
				p.OwnerState = nd.State
				if nd.Silent && nd.State != "DOWN" {
					p.OwnerState = "SILENT"
				}
			}
		}
	}
	return &coordpb.ListPChannelsResponse{Pchannels: s.PChannels, Cchannel: s.CChannel, Version: s.Version}, nil
}

// AddPChannels implements coordpb.ChannelsServer.
func (n *Node) AddPChannels(_ context.Context, req *coordpb.AddPChannelsRequest) (*coordpb.AddPChannelsResponse, error) {
	if len(req.Names) == 0 {
		return nil, status.Error(codes.InvalidArgument, "AddPChannels needs at least one pchannel")
	}
	for _, name := range req.Names {
		if err := vocab.ValidatePChannelName(name); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var added uint32
	for _, name := range req.Names {
		if slices.ContainsFunc(c.ch.state.PChannels, func(p *coordpb.PChannel) bool { return p.Name == name }) {
			continue
		}
		c.ch.state.PChannels = append(c.ch.state.PChannels, &coordpb.PChannel{Name: name, State: "UNINITIALIZED",
			AccessMode: "RW", AvailableInReplication: true})
		added++
	}
	sort.Slice(c.ch.state.PChannels, func(i, j int) bool { return c.ch.state.PChannels[i].Name < c.ch.state.PChannels[j].Name })
	if added > 0 {
		c.bumpLocked()
	}
	return &coordpb.AddPChannelsResponse{Added: added}, nil
}

// Rebalance implements coordpb.ChannelsServer (a no-op; Calls counts it).
func (n *Node) Rebalance(context.Context, *coordpb.RebalanceRequest) (*coordpb.RebalanceResponse, error) {
	return &coordpb.RebalanceResponse{}, nil
}

// ListNodes implements coordpb.ChannelsServer.
func (n *Node) ListNodes(_ context.Context, req *coordpb.ListNodesRequest) (*coordpb.ListNodesResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &coordpb.ListNodesResponse{}
	for _, nd := range c.ch.state.Nodes {
		if nd.State == "DOWN" && !req.IncludeDown {
			continue
		}
		out.Nodes = append(out.Nodes, c.apiNodeLocked(nd))
	}
	return out, nil
}

// DrainNode implements coordpb.ChannelsServer.
func (n *Node) DrainNode(_ context.Context, req *coordpb.DrainNodeRequest) (*coordpb.DrainNodeResponse, error) {
	return n.c.setDrain(req, true)
}

// UndrainNode implements coordpb.ChannelsServer.
func (n *Node) UndrainNode(_ context.Context, req *coordpb.DrainNodeRequest) (*coordpb.DrainNodeResponse, error) {
	return n.c.setDrain(req, false)
}

func (c *Cluster) setDrain(req *coordpb.DrainNodeRequest, drain bool) (*coordpb.DrainNodeResponse, error) {
	if req.NodeId == 0 {
		return nil, status.Error(codes.InvalidArgument, "node id must be positive")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodeLocked(req.NodeId)
	if nd == nil {
		return nil, status.Errorf(codes.NotFound, "streaming node %d not found", req.NodeId)
	}
	if nd.State == "DOWN" {
		return nil, status.Errorf(codes.FailedPrecondition, "streaming node %d is down", req.NodeId)
	}
	reason := req.Reason
	if reason == "" {
		reason = "operator request"
	}
	nd.State, nd.Reason = "UP", ""
	if drain {
		nd.State, nd.Reason = "DRAINING", reason
	}
	c.bumpLocked()
	return &coordpb.DrainNodeResponse{Node: c.apiNodeLocked(nd)}, nil
}

// AllocVirtualChannels implements coordpb.ChannelsServer: count distinct
// PChannels, fewest VChannels first; a repeated request ID or a repeat
// with the same count returns the first answer.
func (n *Node) AllocVirtualChannels(_ context.Context, req *coordpb.AllocVirtualChannelsRequest) (*coordpb.AllocVirtualChannelsResponse, error) {
	if req.CollectionId <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "collection id must be positive, got %d", req.CollectionId)
	}
	if req.Count == 0 || req.Count > vocab.MaxVChannelsPerColl {
		return nil, status.Errorf(codes.InvalidArgument, "vchannel count must be in 1..%d, got %d", vocab.MaxVChannelsPerColl, req.Count)
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if vs, ok := c.ch.allocs[req.RequestId]; ok && req.RequestId != "" {
		return &coordpb.AllocVirtualChannelsResponse{Vchannels: slices.Clone(vs)}, nil
	}
	if vs, ok := c.ch.collections[req.CollectionId]; ok {
		if len(vs) != int(req.Count) {
			return nil, status.Errorf(codes.FailedPrecondition, "collection %d already has %d vchannels, not %d", req.CollectionId, len(vs), req.Count)
		}
		return &coordpb.AllocVirtualChannelsResponse{Vchannels: slices.Clone(vs)}, nil
	}
	cands := slices.Clone(c.ch.state.PChannels)
	if len(cands) < int(req.Count) {
		return nil, status.Errorf(codes.FailedPrecondition, "collection %d needs %d distinct pchannels, only %d are available",
			req.CollectionId, req.Count, len(cands))
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].VchannelCount != cands[j].VchannelCount {
			return cands[i].VchannelCount < cands[j].VchannelCount
		}
		return cands[i].Name < cands[j].Name
	})
	out := make([]string, req.Count)
	for i := range out {
		out[i] = vocab.VChannelName(cands[i].Name, req.CollectionId, i)
		cands[i].VchannelCount++
	}
	c.ch.collections[req.CollectionId] = out
	if req.RequestId != "" {
		c.ch.allocs[req.RequestId] = out
	}
	return &coordpb.AllocVirtualChannelsResponse{Vchannels: slices.Clone(out)}, nil
}

// DropVirtualChannels implements coordpb.ChannelsServer.
func (n *Node) DropVirtualChannels(_ context.Context, req *coordpb.DropVirtualChannelsRequest) (*coordpb.DropVirtualChannelsResponse, error) {
	if req.CollectionId <= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "collection id must be positive, got %d", req.CollectionId)
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.ch.collections[req.CollectionId] {
		for _, p := range c.ch.state.PChannels {
			if p.Name == vocab.PChannelOf(v) && p.VchannelCount > 0 {
				p.VchannelCount--
			}
		}
	}
	delete(c.ch.collections, req.CollectionId)
	return &coordpb.DropVirtualChannelsResponse{}, nil
}

// ListVirtualChannels implements coordpb.ChannelsServer.
func (n *Node) ListVirtualChannels(_ context.Context, req *coordpb.ListVirtualChannelsRequest) (*coordpb.ListVirtualChannelsResponse, error) {
	if req.CollectionId < 0 {
		return nil, status.Error(codes.InvalidArgument, "collection_id must not be negative")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &coordpb.ListVirtualChannelsResponse{}
	if req.CollectionId != 0 {
		vs, ok := c.ch.collections[req.CollectionId]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "collection %d has no vchannels", req.CollectionId)
		}
		out.Collections = append(out.Collections, &coordpb.CollectionVChannels{CollectionId: req.CollectionId, Vchannels: slices.Clone(vs)})
		return out, nil
	}
	ids := make([]int64, 0, len(c.ch.collections))
	for id := range c.ch.collections {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		out.Collections = append(out.Collections, &coordpb.CollectionVChannels{CollectionId: id, Vchannels: slices.Clone(c.ch.collections[id])})
	}
	return out, nil
}

// UpdateReplicateConfiguration implements coordpb.ChannelsServer.
func (n *Node) UpdateReplicateConfiguration(_ context.Context, req *coordpb.UpdateReplicateConfigurationRequest) (*coordpb.UpdateReplicateConfigurationResponse, error) {
	if len(req.GetConfig().GetClusters()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "replicate configuration needs at least one cluster")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ch.replicate = proto.Clone(req.Config).(*coordpb.ReplicateConfiguration)
	c.bumpLocked()
	return &coordpb.UpdateReplicateConfigurationResponse{}, nil
}

// ResetReplicateRole implements coordpb.ChannelsServer: a SECONDARY keeps
// only its own cluster and becomes PRIMARY; a PRIMARY is refused.
func (n *Node) ResetReplicateRole(_ context.Context, req *coordpb.ResetReplicateRoleRequest) (*coordpb.GetReplicateConfigurationResponse, error) {
	if req.GetReason() == "" {
		return nil, status.Error(codes.InvalidArgument, "reason must be 1..1024 bytes, got 0")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch.role != "SECONDARY" {
		return nil, status.Errorf(codes.FailedPrecondition, "cluster %s is already a primary", c.ch.clusterID)
	}
	cfg := &coordpb.ReplicateConfiguration{}
	for _, cl := range c.ch.replicate.GetClusters() {
		if cl.ClusterId == c.ch.clusterID {
			cfg.Clusters = append(cfg.Clusters, proto.Clone(cl).(*coordpb.ReplicateCluster))
		}
	}
	c.ch.replicate, c.ch.role = cfg, "PRIMARY"
	c.bumpLocked()
	return &coordpb.GetReplicateConfigurationResponse{Config: proto.Clone(cfg).(*coordpb.ReplicateConfiguration), ClusterId: c.ch.clusterID, Role: "PRIMARY"}, nil
}

// GetReplicateConfiguration implements coordpb.ChannelsServer.
func (n *Node) GetReplicateConfiguration(context.Context, *coordpb.GetReplicateConfigurationRequest) (*coordpb.GetReplicateConfigurationResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &coordpb.GetReplicateConfigurationResponse{ClusterId: c.ch.clusterID, Role: c.ch.role}
	if c.ch.replicate != nil {
		resp.Config = proto.Clone(c.ch.replicate).(*coordpb.ReplicateConfiguration)
	}
	return resp, nil
}

// ReportAssignmentError implements coordpb.ChannelsServer: the report is
// recorded; it marks the channel UNAVAILABLE when term is its current term
// and it is not UNAVAILABLE already.
func (n *Node) ReportAssignmentError(_ context.Context, req *coordpb.ReportAssignmentErrorRequest) (*coordpb.ReportAssignmentErrorResponse, error) {
	if err := vocab.ValidatePChannelName(req.Pchannel); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if req.Term < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "term of %s must be >= 1, got %d", req.Pchannel, req.Term)
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ch.reports = append(c.ch.reports, proto.Clone(req).(*coordpb.ReportAssignmentErrorRequest))
	for _, p := range c.ch.state.PChannels {
		if p.Name == req.Pchannel && p.Term == req.Term && p.State != "UNAVAILABLE" {
			p.State, p.LastError = "UNAVAILABLE", req.Error
			c.bumpLocked()
			return &coordpb.ReportAssignmentErrorResponse{Marked: true}, nil
		}
	}
	return &coordpb.ReportAssignmentErrorResponse{}, nil
}
