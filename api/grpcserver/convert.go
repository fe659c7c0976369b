package grpcserver

import (
	"strings"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/channels"
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
func channelsByNode(st *fsm.State) map[uint64][]string { return channels.HeldByNode(st) }

// apiReplicateConfig is an installed configuration as the API shows it.
func apiReplicateConfig(c *logpb.ReplicateConfiguration) *coordpb.ReplicateConfiguration {
	return channels.APIReplicateConfig(c)
}

func apiRebalance(r channels.RebalanceResult) *coordpb.RebalanceResponse {
	out := &coordpb.RebalanceResponse{Reason: r.Reason, RoundDone: r.RoundDone}
	if !r.NextMove.IsZero() {
		out.NextMoveUnixMs = r.NextMove.UnixMilli()
	}
	for _, m := range r.Moves {
		out.Moves = append(out.Moves, &coordpb.PChannelMove{Pchannel: m.PChannel, FromNodeId: m.From, ToNodeId: m.To, Term: m.Term})
	}
	return out
}
