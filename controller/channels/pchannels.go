package channels

import (
	"context"
	"fmt"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// AddPChannels commits the new PChannels, asks for a balance round and
// returns how many were new.
func (s *Service) AddPChannels(ctx context.Context, r AddPChannels) (uint32, error) {
	res, err := s.commit(ctx, r.cmd)
	if err != nil {
		return 0, err
	}
	s.rebalancer.Trigger()
	return uint32(res.GetNumber()), nil
}

// NodeView is a streaming node and the PChannels it holds or is being
// given.
type NodeView struct {
	Node      *logpb.StreamingNodeRecord
	PChannels []string
}

// SetDrain commits the drain change and returns the node as the state now
// shows it; ErrNodeGone when it was marked DOWN and evicted since.
func (s *Service) SetDrain(ctx context.Context, r Drain) (NodeView, error) {
	if _, err := s.commit(ctx, r.cmd); err != nil {
		return NodeView{}, err
	}
	st := s.leader.State()
	n, ok := st.StreamingNode(r.nodeID)
	if !ok {
		return NodeView{}, fmt.Errorf("%w: streaming node %d", ErrNodeGone, r.nodeID)
	}
	return NodeView{Node: n, PChannels: HeldByNode(st)[n.Id]}, nil
}

// HeldByNode maps node ID → the PChannels it holds or is being given
// (ASSIGNED or ASSIGNING), sorted.
func HeldByNode(st *fsm.State) map[uint64][]string {
	out := map[uint64][]string{}
	for _, p := range st.PChannels() {
		if p.State == logpb.PChannelState_PCHANNEL_ASSIGNED || p.State == logpb.PChannelState_PCHANNEL_ASSIGNING {
			out[p.NodeId] = append(out[p.NodeId], p.Name)
		}
	}
	return out
}

// AllocVChannels commits the placement and returns the VChannel names (the
// first placement again for a repeat with the same count).
func (s *Service) AllocVChannels(ctx context.Context, r AllocVChannels) ([]string, error) {
	res, err := s.commit(ctx, r.cmd)
	if err != nil {
		return nil, err
	}
	return res.GetVchannels().GetVchannels(), nil
}

// DropVChannels commits the drop.
func (s *Service) DropVChannels(ctx context.Context, r DropVChannels) error {
	_, err := s.commit(ctx, r.cmd)
	return err
}

// ReportAssignmentError commits the report and says whether the channel
// was marked UNAVAILABLE (false: the report was about another term).
func (s *Service) ReportAssignmentError(ctx context.Context, r AssignmentError) (bool, error) {
	res, err := s.commit(ctx, r.cmd)
	if err != nil {
		return false, err
	}
	return res.GetNumber() > 0, nil
}
