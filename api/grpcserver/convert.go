package grpcserver

import (
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/fsm"
)

func apiVersion(v fsm.AssignmentVersion) *coordpb.Version {
	return &coordpb.Version{Global: v.Global, Local: v.Local}
}

// channelsByNode maps node ID → PChannels it holds or is being given
// (ASSIGNED or ASSIGNING), sorted.
func channelsByNode(st *fsm.State) map[uint64][]string { return channels.HeldByNode(st) }

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
