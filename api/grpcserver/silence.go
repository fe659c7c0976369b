package grpcserver

import (
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/fsm"
)

// Silence: a live streaming node whose heartbeat is late, judged by the
// leader's tracker (which alone knows heartbeat ages) with the rule it
// owns (routines.Sessions.SilentAfter; docs/operations.md#silent-streaming-nodes).
// A follower's stale read leaves the fields empty rather than guess.

// stateSilent is the owner state of a PChannel whose owner is silent.
const stateSilent = "SILENT"

// judgeSilence fills n's leader-only fields: the TTL, the silence
// threshold and whether the node is silent now. Without a heartbeat age
// (a follower, or no heartbeat in this leadership) it does nothing.
func (s *Server) judgeSilence(n *coordpb.StreamingNode) {
	if n.LastHeartbeatMsAgo < 0 {
		return
	}
	n.NodeTtlMs = s.health.TTL().Milliseconds()
	n.SilentAfterMs = s.health.SilentAfter(n.Id).Milliseconds()
	n.Silent = n.State != channels.NodeDown && n.LastHeartbeatMsAgo > n.SilentAfterMs
}

// ownerState is the state of the node owning a PChannel as
// PChannel.owner_state says it: the FSM's UP, DRAINING or DOWN, or SILENT
// when the leader sees a live owner's heartbeat late; "" for no owner or
// one the state does not know. memo caches one answer per node.
func (s *Server) ownerState(st *fsm.State, node uint64, memo map[uint64]string) string {
	if node == 0 {
		return ""
	}
	if v, ok := memo[node]; ok {
		return v
	}
	var out string
	if rec, ok := st.StreamingNode(node); ok {
		n := &coordpb.StreamingNode{Id: node, State: channels.NodeStateName(rec.State), LastHeartbeatMsAgo: s.lastSeenMs(node)}
		s.judgeSilence(n)
		out = n.State
		if n.Silent {
			out = stateSilent
		}
	}
	memo[node] = out
	return out
}
