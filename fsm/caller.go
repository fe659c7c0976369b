package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// sessionOf is the streaming node session a command speaks for, if it is
// one a node's call proposes (docs/security.md#per-node-identity). strict:
// the command comes only from a node's call (the data path's saves,
// checkpoints, import segments, and acks from a node), so a session bound
// to an identity demands that identity's stamp; otherwise (drain and
// down, which the leader's own routines and operators also propose) only a
// stamped command is checked.
func sessionOf(body proto.Message) (node uint64, strict, ok bool) {
	switch b := body.(type) {
	case *logpb.SaveBinlogPaths:
		return b.NodeId, true, true
	case *logpb.UpdateChannelCheckpoints:
		return b.NodeId, true, true
	case *logpb.CreateImportSegment:
		return b.NodeId, true, true
	case *logpb.FinishImportSegment:
		return b.NodeId, true, true
	case *logpb.AckBroadcast:
		return b.FromNode, true, b.FromNode != 0 // 0: the broadcaster's own ack
	case *logpb.MarkStreamingNodeDown:
		return b.NodeId, false, true
	case *logpb.SetStreamingNodeDrain:
		return b.NodeId, false, true
	}
	return 0, false, false
}

// checkCaller is per-node identity inside Apply: a command proposed for a
// node credential (CallerNode, stamped by the leader from the caller's
// credential) may speak only for sessions registered by that identity, and
// a data-path command for a session registered by a node credential must
// carry that credential's stamp. The API refuses such calls before
// proposing them; this keeps a leader that did not from writing them.
// Sessions registered without a credential (authentication off) and
// unstamped commands for them pass, as before per-node identity.
func (s *State) checkCaller(c commands.Command) *logpb.Result {
	node, strict, ok := sessionOf(c.Body)
	if !ok {
		return nil
	}
	var bound uint64
	if n, found := s.ch.nodes.Get(node); found {
		bound = n.BoundNode
	}
	switch {
	case c.CallerNode != 0 && c.CallerNode != bound:
		return reject(logpb.RejectCode_REJECT_PERMISSION,
			"%s for streaming node %d (node identity %d) was proposed for node identity %d", c.Type, node, bound, c.CallerNode)
	case c.CallerNode == 0 && bound != 0 && strict:
		return reject(logpb.RejectCode_REJECT_PERMISSION,
			"%s for streaming node %d needs the credential of node identity %d, which registered it", c.Type, node, bound)
	}
	return nil
}
