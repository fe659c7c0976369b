package datapath

import (
	"context"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Streaming-node sessions (docs/semantics.md#streaming-nodes): a
// registration is a command; heartbeats are leader memory only (the
// node-health tracker); a drain and a deregistration are commands.

// Register starts a streaming node session. A second process at a live
// node's address is refused (ErrPrecondition) while that node's session
// is live; once it has lapsed the newcomer replaces it. A retry by the
// same process (same incarnation) gets the same answer from Apply.
func (s *Service) Register(ctx context.Context, r Registration) (*logpb.RegisterNodeResult, error) {
	if _, err := s.established(); err != nil {
		return nil, err
	}
	body := r.body()
	for _, n := range s.l.State().StreamingNodes() {
		if n.Address != body.Address || n.State == logpb.NodeState_NODE_DOWN || n.Incarnation == body.Incarnation {
			continue
		}
		if age, ok := s.sessions.LastSeen(n.Id); ok && age <= s.sessions.TTL() {
			return nil, vocab.Errorf(ErrPrecondition, "address %s is held by streaming node %d, whose session is live (last heartbeat %v ago)",
				body.Address, n.Id, age.Round(1e6))
		}
		body.ReplaceNodeId = n.Id
	}
	res, err := s.commitNew(ctx, body)
	if err != nil {
		return nil, err
	}
	return res.GetRegisterNode(), nil
}

// HeartbeatResult answers a heartbeat: the coordinator term (a fence,
// docs/architecture.md#fencing), the node's state and the session TTL.
type HeartbeatResult struct {
	CoordTerm uint64
	State     logpb.NodeState
	TTLMs     uint64
}

// Heartbeat keeps a live (node, epoch) session alive on the leader
// (leader memory only, never in the log). ErrNotFound when the session is
// unknown, DOWN or of another epoch: the node must register again.
func (s *Service) Heartbeat(ctx context.Context, h Heartbeat) (HeartbeatResult, error) {
	term, err := s.established()
	if err != nil {
		return HeartbeatResult{}, err
	}
	n, err := liveSession(s.l.State(), h.Node, h.Epoch)
	if err != nil {
		return HeartbeatResult{}, err
	}
	s.sessions.HeartbeatHeld(h.Node, h.Epoch, fsm.VersionOf(h.seen), h.held, h.interval)
	return HeartbeatResult{CoordTerm: term, State: n.State, TTLMs: uint64(s.sessions.TTL().Milliseconds())}, nil
}

// liveSession checks that (node, epoch) is a live registration.
func liveSession(st *fsm.State, node, epoch uint64) (*logpb.StreamingNodeRecord, error) {
	if node == 0 {
		return nil, vocab.Errorf(ErrInvalid, "node_id must be positive")
	}
	n, ok := st.StreamingNode(node)
	if !ok || n.State == logpb.NodeState_NODE_DOWN {
		return nil, vocab.Errorf(ErrNotFound, "streaming node %d is not registered (or its session ended); register again", node)
	}
	if n.Epoch != epoch {
		return nil, vocab.Errorf(ErrNotFound, "streaming node %d has epoch %d, not %d; register again", node, n.Epoch, epoch)
	}
	return n, nil
}

// Session names a streaming node session (a drain or deregistration).
type Session struct{ Node, Epoch uint64 }

// SessionResult is a session's state after a drain or deregistration and
// the PChannels it still holds.
type SessionResult struct {
	State     logpb.NodeState
	PChannels []string
}

// SpeaksFor is the caller's per-node identity check (the API's rule,
// docs/security.md#per-node-identity): nil when the caller may speak for
// node, and then the caller's node identity, which its commands are
// stamped with (commands.CallerNode; 0 without authentication).
type SpeaksFor func(ctx context.Context, node uint64) (caller uint64, err error)

// EndSession drains (controlled shutdown, step one: the node becomes
// DRAINING) or deregisters (the node goes DOWN) a session. Who may end
// the session is checked first with speaksFor, except for the
// deregistration of a record already evicted: it answers DOWN, as there
// is nothing to protect. A deregistration of a node whose record is gone
// or DOWN answers DOWN without error (a retry after a lost answer); one
// naming another epoch of a node that is still up is NotFound naming the
// epochs, as a drain is, since DOWN would describe a node that stays up.
func (s *Service) EndSession(ctx context.Context, sess Session, deregister bool, speaksFor SpeaksFor) (SessionResult, error) {
	if _, err := s.established(); err != nil {
		return SessionResult{}, err
	}
	var caller uint64 // the drain or deregistration is stamped with it
	if _, known := s.l.State().StreamingNode(sess.Node); known || !deregister {
		var err error
		if caller, err = speaksFor(ctx, sess.Node); err != nil {
			return SessionResult{}, err
		}
	}
	n, err := liveSession(s.l.State(), sess.Node, sess.Epoch)
	if err != nil {
		if deregister && sess.Node != 0 && nodeIsDown(s.l.State(), sess.Node) {
			return SessionResult{State: logpb.NodeState_NODE_DOWN}, nil // already gone: done
		}
		return SessionResult{}, err
	}
	if deregister {
		_, err = s.commitNew(ctx, &logpb.MarkStreamingNodeDown{NodeId: n.Id, Epoch: n.Epoch, Reason: "deregistered"}, commands.CallerNode(caller))
	} else if n.State != logpb.NodeState_NODE_DRAINING {
		_, err = s.commitNew(ctx, &logpb.SetStreamingNodeDrain{NodeId: n.Id, Draining: true, Reason: "controlled shutdown"}, commands.CallerNode(caller))
	}
	if err != nil {
		return SessionResult{}, err
	}
	st := s.l.State()
	cur, ok := st.StreamingNode(n.Id)
	if !ok {
		// Marking the node DOWN may evict its record at once (the oldest
		// DOWN records go first once MaxDownNodes are kept): it is gone.
		return SessionResult{State: logpb.NodeState_NODE_DOWN}, nil
	}
	return SessionResult{State: cur.State, PChannels: heldBy(st, n.Id)}, nil
}

// nodeIsDown: node's record is gone (evicted, or never was) or DOWN.
func nodeIsDown(st *fsm.State, node uint64) bool {
	n, ok := st.StreamingNode(node)
	return !ok || n.State == logpb.NodeState_NODE_DOWN
}

// heldBy lists the PChannels assigned (or being assigned) to node.
func heldBy(st *fsm.State, node uint64) []string {
	var out []string
	for _, p := range st.PChannels() {
		if p.NodeId == node && (p.State == logpb.PChannelState_PCHANNEL_ASSIGNED || p.State == logpb.PChannelState_PCHANNEL_ASSIGNING) {
			out = append(out, p.Name)
		}
	}
	return out
}
