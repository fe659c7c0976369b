package fsm

import (
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// checkExternalAck guards an ack sent by a streaming node (FromNode set):
// only an ack_sync_up task waits for such acks, the sender must hold a live
// session, and every checkpoint it gives for a target must be for a
// channel that sender owns now. Anything else could mark a target acked
// whose WAL never received the message, so the whole ack is refused and
// nothing changes. Checkpoints for non-targets stay ignored, as for the
// leader's own acks.
//
// The checkpoint's term: up to body version 2 it had to be the channel's
// current term. That refused for ever a true ack: a message persisted by a
// previous owner (term T) and found again by the current owner (term > T)
// when the broadcaster re-appended it after the move, which the node
// deduplicates and acks with the record's own position, at T. No owner of
// term T can ack any more (it owns nothing now), so the task held its
// resource keys until an operator abandoned it (jepsen-style-tests
// hostile-3-r01 seed 296971646: no broadcast on those keys for the rest of
// the run). From version 3 the current owner may name any term up to the
// channel's current one: it vouches for its own log, and it is the only
// sender accepted at all. A term above the channel's stays refused (issue
// D7's bound: no owner has written there).
func checkExternalAck(next *State, t *logpb.BroadcastTask, b *logpb.AckBroadcast, version uint32) *logpb.Result {
	if !t.AckSyncUp {
		return reject(logpb.RejectCode_REJECT_CONFLICT,
			"broadcast %d is not ack_sync_up: its targets are acked by coordd's own appends, not by streaming nodes", t.Id)
	}
	n, ok := next.ch.nodes.Get(b.FromNode)
	if !ok || n.Epoch != b.FromEpoch || n.State == logpb.NodeState_NODE_DOWN {
		return reject(logpb.RejectCode_REJECT_CONFLICT,
			"ack for broadcast %d: streaming node %d has no live session at epoch %d", t.Id, b.FromNode, b.FromEpoch)
	}
	for _, cp := range b.Checkpoints {
		if !isTarget(t, cp.Vchannel) {
			continue
		}
		name := vocab.PChannelOf(cp.Vchannel)
		p, ok := next.ch.pchannels.Get(name)
		if !ok {
			return reject(logpb.RejectCode_REJECT_NOT_FOUND, "ack for broadcast %d: pchannel %s does not exist", t.Id, name)
		}
		if p.NodeId != b.FromNode {
			return reject(logpb.RejectCode_REJECT_CONFLICT,
				"ack for broadcast %d: pchannel %s of %s is owned by streaming node %d, not %d", t.Id, name, cp.Vchannel, p.NodeId, b.FromNode)
		}
		if cp.Term > p.Term || (cp.Term != p.Term && version < 3) {
			return reject(logpb.RejectCode_REJECT_STALE,
				"ack for broadcast %d: checkpoint of %s is at term %d, but pchannel %s is at term %d", t.Id, cp.Vchannel, cp.Term, name, p.Term)
		}
	}
	return nil
}
