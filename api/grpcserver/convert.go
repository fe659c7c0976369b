package grpcserver

import (
	"strings"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// Conversions from FSM records to API messages. Enum names lose their
// prefix (PCHANNEL_ASSIGNED → ASSIGNED) so the API speaks the spec's words.

func stateName(s logpb.PChannelState) string {
	return strings.TrimPrefix(s.String(), "PCHANNEL_")
}

func nodeStateName(s logpb.NodeState) string { return strings.TrimPrefix(s.String(), "NODE_") }

func modeName(m logpb.AccessMode) string { return strings.TrimPrefix(m.String(), "ACCESS_") }

func apiVersion(v fsm.AssignmentVersion) *coordpb.Version {
	return &coordpb.Version{Global: v.Global, Local: v.Local}
}

func apiPChannel(st *fsm.State, p *logpb.PChannelRecord) *coordpb.PChannel {
	out := &coordpb.PChannel{
		Name: p.Name, Term: p.Term, State: stateName(p.State), NodeId: p.NodeId, AccessMode: modeName(p.Mode),
		AvailableInReplication: st.AvailableInReplication(p.Name), VchannelCount: uint32(st.VChannelCount(p.Name)),
		LastAssignUnixMs: p.LastAssignMs, LastError: p.LastError, LastErrorUnixMs: p.LastErrorMs, FailedAttempts: p.FailedAttempts,
	}
	if n, ok := st.StreamingNode(p.NodeId); ok {
		out.NodeAddress = n.Address
	}
	for _, h := range p.Histories {
		out.Histories = append(out.Histories, &coordpb.PChannelHistory{Term: h.Term, NodeId: h.NodeId, AccessMode: modeName(h.Mode)})
	}
	return out
}

func apiNode(n *logpb.StreamingNodeRecord, pchannels []string, lastSeenMs int64) *coordpb.StreamingNode {
	return &coordpb.StreamingNode{
		Id: n.Id, Address: n.Address, ResourceGroup: n.ResourceGroup, State: nodeStateName(n.State), Epoch: n.Epoch,
		Reason: n.Reason, RegisteredUnixMs: n.RegisteredMs, Pchannels: pchannels, LastHeartbeatMsAgo: lastSeenMs,
		BoundNode: n.BoundNode,
	}
}

// channelsByNode maps node ID → PChannels it holds or is being given
// (ASSIGNED or ASSIGNING), sorted.
func channelsByNode(st *fsm.State) map[uint64][]string {
	out := map[uint64][]string{}
	for _, p := range st.PChannels() {
		if p.State == logpb.PChannelState_PCHANNEL_ASSIGNED || p.State == logpb.PChannelState_PCHANNEL_ASSIGNING {
			out[p.NodeId] = append(out[p.NodeId], p.Name)
		}
	}
	return out
}

func apiReplicateConfig(c *logpb.ReplicateConfiguration) *coordpb.ReplicateConfiguration {
	if c == nil {
		return nil
	}
	out := &coordpb.ReplicateConfiguration{}
	for _, cl := range c.Clusters {
		out.Clusters = append(out.Clusters, &coordpb.ReplicateCluster{ClusterId: cl.ClusterId, Pchannels: cl.Pchannels})
	}
	for _, e := range c.Topology {
		out.Topology = append(out.Topology, &coordpb.ReplicateTopology{SourceClusterId: e.SourceClusterId, TargetClusterId: e.TargetClusterId})
	}
	return out
}

func logReplicateConfig(c *coordpb.ReplicateConfiguration) *logpb.ReplicateConfiguration {
	if c == nil {
		return nil
	}
	out := &logpb.ReplicateConfiguration{}
	for _, cl := range c.Clusters {
		out.Clusters = append(out.Clusters, &logpb.ReplicateCluster{ClusterId: cl.ClusterId, Pchannels: cl.Pchannels})
	}
	for _, e := range c.Topology {
		out.Topology = append(out.Topology, &logpb.ReplicateTopology{SourceClusterId: e.SourceClusterId, TargetClusterId: e.TargetClusterId})
	}
	return out
}
