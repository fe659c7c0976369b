package datapath

import (
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Task is one segment a streaming node's session is to flush.
type Task struct {
	Segment      *fsm.Segment
	PChannelTerm int64 // the term the session holds the segment's PChannel in
}

// FlushTasks is the current flush work of session (node, epoch) in this
// member's applied state (any member answers it): the Flushing segments on
// the PChannels the node holds, by segment ID. The session must be live
// with this epoch (CheckSession).
func (s *Service) FlushTasks(node, epoch uint64) ([]Task, error) {
	st := s.l.State()
	if err := CheckSession(st, node, epoch); err != nil {
		return nil, err
	}
	return TasksOf(st, node), nil
}

// CheckSession checks that node is a live session with this epoch:
// ErrNotFound for an unknown node, ErrPrecondition for another epoch or a
// session that is DOWN.
func CheckSession(st *fsm.State, node, epoch uint64) error {
	n, ok := st.StreamingNode(node)
	if !ok {
		return vocab.Errorf(ErrNotFound, "streaming node %d", node)
	}
	if n.Epoch != epoch || n.State == logpb.NodeState_NODE_DOWN {
		return vocab.Errorf(ErrPrecondition, "node %d session is epoch %d (%s), not %d", node, n.Epoch, n.State, epoch)
	}
	return nil
}

// TasksOf is node's flush work in st: the Flushing segments whose
// PChannel the node holds (Assigned, or Assigning to it), by segment ID.
func TasksOf(st *fsm.State, node uint64) []Task {
	var out []Task
	if st.SegmentCountIn(logpb.SegmentState_SEGMENT_FLUSHING) == 0 {
		// The common case, answered without a scan: every watcher
		// recomputes its set on every applied batch.
		return out
	}
	st.EachActiveSegment(func(g *fsm.Segment) bool {
		if g.State != logpb.SegmentState_SEGMENT_FLUSHING {
			return true
		}
		p, ok := st.PChannel(vocab.PChannelOf(g.VChannel))
		if !ok || p.NodeId != node || (p.State != logpb.PChannelState_PCHANNEL_ASSIGNED && p.State != logpb.PChannelState_PCHANNEL_ASSIGNING) {
			return true
		}
		out = append(out, Task{Segment: g, PChannelTerm: p.Term})
		return true
	})
	return out
}
