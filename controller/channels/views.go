package channels

import (
	"strings"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// The Channels records (PChannels, streaming nodes) as the API shows them.
// Enum names lose their prefix (PCHANNEL_ASSIGNED → ASSIGNED) so the API
// speaks the spec's words. The API adapts these views and never reads the
// log's records itself.

// StateName is a PChannel's state as the API spells it.
func StateName(p *logpb.PChannelRecord) string { return pchannelStateName(p.State) }

func pchannelStateName(s logpb.PChannelState) string {
	return strings.TrimPrefix(s.String(), "PCHANNEL_")
}

// NodeStateName is a streaming node's state as the API spells it.
func NodeStateName(s logpb.NodeState) string { return strings.TrimPrefix(s.String(), "NODE_") }

// NodeDown is the API's name of a DOWN streaming node's state
// (NodeStateName of NODE_DOWN; TestNodeDownName keeps them in step).
const NodeDown = "DOWN"

func modeName(m logpb.AccessMode) string { return strings.TrimPrefix(m.String(), "ACCESS_") }

// Assigned reports whether p is ASSIGNED (its owner may open its WAL).
func Assigned(p *logpb.PChannelRecord) bool { return p.State == logpb.PChannelState_PCHANNEL_ASSIGNED }

// ReadOnly reports whether p's owner may only read its WAL.
func ReadOnly(p *logpb.PChannelRecord) bool { return p.Mode == logpb.AccessMode_ACCESS_RO }

// IsDown reports whether n is DOWN.
func IsDown(n *logpb.StreamingNodeRecord) bool { return n.State == logpb.NodeState_NODE_DOWN }

// PChannelInfo is p of st as the API shows it.
func PChannelInfo(st *fsm.State, p *logpb.PChannelRecord) *coordpb.PChannel {
	out := &coordpb.PChannel{
		Name: p.Name, Term: p.Term, State: StateName(p), NodeId: p.NodeId, AccessMode: modeName(p.Mode),
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

// AssignmentInfo is p as an assignment stream shows it (no history).
func AssignmentInfo(p *logpb.PChannelRecord) *coordpb.PChannel {
	return &coordpb.PChannel{Name: p.Name, Term: p.Term, State: StateName(p), NodeId: p.NodeId, AccessMode: modeName(p.Mode)}
}

// NodeInfo is n as the API shows it, holding pchannels, last heard from
// lastSeenMs ago (-1: unknown).
func NodeInfo(n *logpb.StreamingNodeRecord, pchannels []string, lastSeenMs int64) *coordpb.StreamingNode {
	return &coordpb.StreamingNode{
		Id: n.Id, Address: n.Address, ResourceGroup: n.ResourceGroup, State: NodeStateName(n.State), Epoch: n.Epoch,
		Reason: n.Reason, RegisteredUnixMs: n.RegisteredMs, Pchannels: pchannels, LastHeartbeatMsAgo: lastSeenMs,
		BoundNode: n.BoundNode,
	}
}

// ModeName is p's access mode as the API spells it (RW, RO).
func ModeName(p *logpb.PChannelRecord) string { return modeName(p.Mode) }
