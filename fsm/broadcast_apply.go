package fsm

import (
	"math"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// applyCreateBroadcast commits a PENDING task
// (docs/semantics.md#broadcast-lifecycle) before any
// append. Guards: the cluster is primary; the CChannel is a target; every
// target's PChannel exists; a built-in message type carries a payload its
// callback can read, and its callback can succeed on this state
// (CheckBroadcastCreation). An idempotency key already known in its scope
// (message type, scoped key) returns that task instead
// (docs/semantics.md#idempotency-keys).
//
// A create the leader pipelined behind conflicting completions
// (after_broadcasts) is decided only once each of those tasks is a
// TOMBSTONE or pruned, so every guard above runs on the state their
// callbacks left; before that it is refused with REJECT_ORDER and changes
// nothing (docs/semantics.md#resource-keys).
func applyCreateBroadcast(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.CreateBroadcast)
	for _, id := range b.AfterBroadcasts {
		if id >= next.alloc.nextID {
			return reject(logpb.RejectCode_REJECT_INVALID, "predecessor broadcast %d was never created (next id %d)", id, next.alloc.nextID)
		}
	}
	for _, id := range b.AfterBroadcasts {
		if t, ok := next.bc.tasks.Get(id); ok && t.State != logpb.BroadcastState_BROADCAST_TOMBSTONE {
			return reject(logpb.RejectCode_REJECT_ORDER, "broadcast %d, which holds a conflicting resource key, is not finished yet", id)
		}
	}
	if b.IdempotencyKey != "" {
		if id, ok := next.bc.idem.Get(idemScope(b.MessageType, b.IdempotencyKey)); ok {
			return &logpb.Result{Value: &logpb.Result_Broadcast{Broadcast: &logpb.BroadcastCreated{BroadcastId: id, Duplicated: true}}}
		}
	}
	if !next.IsPrimary() {
		return reject(logpb.RejectCode_REJECT_NOT_PRIMARY, "cluster is not primary, cannot do any DDL/DCL")
	}
	if r := next.CheckBroadcastCreation(b); r != nil {
		return &logpb.Result{Rejection: r}
	}
	if next.bc.pending >= MaxPendingBroadcasts {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "%d broadcasts pending (max %d)", next.bc.pending, MaxPendingBroadcasts)
	}
	if next.alloc.nextID == math.MaxUint64 {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "id space exhausted: next %d", next.alloc.nextID)
	}
	id := next.alloc.nextID
	next.alloc.nextID++
	targets := append([]string(nil), b.Vchannels...)
	sort.Strings(targets)
	next.bc.put(&logpb.BroadcastTask{
		Id: id, MessageType: b.MessageType, Payload: b.Payload, ResourceKeys: commands.NormalizeResourceKeys(b.ResourceKeys),
		Vchannels: targets, AckSyncUp: b.AckSyncUp, IdempotencyKey: b.IdempotencyKey,
		State: logpb.BroadcastState_BROADCAST_PENDING, CreatedMs: c.ProposedAtUnixMs,
	})
	return &logpb.Result{Value: &logpb.Result_Broadcast{Broadcast: &logpb.BroadcastCreated{BroadcastId: id}}}
}

func checkBroadcastTargets(next *State, targets []string) *logpb.Result {
	cch := next.CChannel()
	if cch == "" {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "streaming is not initialized: there is no control channel yet")
	}
	hasCChannel := false
	for _, v := range targets {
		if v == cch {
			hasCChannel = true
		}
		if _, ok := next.ch.pchannels.Get(vocab.PChannelOf(v)); !ok {
			return reject(logpb.RejectCode_REJECT_NOT_FOUND, "target %s: pchannel %s does not exist", v, vocab.PChannelOf(v))
		}
	}
	if !hasCChannel {
		return reject(logpb.RejectCode_REJECT_INVALID, "the control channel %s must be a target of every broadcast", cch)
	}
	return nil
}

// applyAckBroadcast records checkpoints; the first per VChannel wins. Unknown
// or finished tasks, and VChannels that are not targets, are no-ops: late acks
// are normal (docs/semantics.md#broadcast-acks). An ack from a streaming node
// must pass checkExternalAck.
func applyAckBroadcast(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.AckBroadcast)
	t, ok := next.bc.tasks.Get(b.BroadcastId)
	if !ok || t.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
		return &logpb.Result{Value: &logpb.Result_Number{Number: 0}}
	}
	if b.FromNode != 0 {
		if r := checkExternalAck(next, t, b, c.Version); r != nil {
			return r
		}
	}
	nt, added := withAcks(t, b.Checkpoints)
	if added > 0 {
		next.bc.put(nt)
	}
	return &logpb.Result{Value: &logpb.Result_Number{Number: uint64(added)}}
}

// withAcks returns t with cps recorded (the first checkpoint per target
// wins; non-targets are skipped) and how many it added; t itself is
// returned, unchanged, when none is new.
func withAcks(t *logpb.BroadcastTask, cps []*logpb.VChannelCheckpoint) (*logpb.BroadcastTask, int) {
	var nt *logpb.BroadcastTask
	added := 0
	for _, cp := range cps {
		cur := t
		if nt != nil {
			cur = nt
		}
		if !isTarget(cur, cp.Vchannel) {
			continue
		}
		if _, done := Acked(cur, cp.Vchannel); done {
			continue
		}
		if nt == nil {
			nt = proto.Clone(t).(*logpb.BroadcastTask)
		}
		nt.Acked = append(nt.Acked, proto.Clone(cp).(*logpb.VChannelCheckpoint))
		added++
	}
	if nt == nil {
		return t, 0
	}
	sort.Slice(nt.Acked, func(i, j int) bool { return nt.Acked[i].Vchannel < nt.Acked[j].Vchannel })
	return nt, added
}

func isTarget(t *logpb.BroadcastTask, v string) bool {
	i := sort.SearchStrings(t.Vchannels, v)
	return i < len(t.Vchannels) && t.Vchannels[i] == v
}

// applyCompleteBroadcast runs the ack callback and tombstones the task in one
// step, only once every target is acked (docs/semantics.md#ack-callbacks). A
// callback that refuses leaves the task PENDING with the error and attempt
// count recorded, so a stuck task explains itself. The checkpoints it
// carries (the leader's last FastAck results) are recorded first, as an
// AckBroadcast from the leader would record them, but only when they
// leave every target acked: otherwise the command is refused whole.
func applyCompleteBroadcast(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.CompleteBroadcast)
	id := b.BroadcastId
	t, ok := next.bc.tasks.Get(id)
	if !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "broadcast %d does not exist", id)
	}
	if t.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
		return completion(true, "")
	}
	if len(b.Checkpoints) > 0 {
		if t.AckSyncUp {
			return reject(logpb.RejectCode_REJECT_CONFLICT, "broadcast %d is acked by its streaming nodes (ack_sync_up), not by the leader", id)
		}
		if withCps, added := withAcks(t, b.Checkpoints); added > 0 && AllAcked(withCps) {
			next.bc.put(withCps) // recorded whatever the callback says below
			t = withCps
		}
	}
	if !AllAcked(t) {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "broadcast %d: %d of %d targets acked", id, len(t.Acked), len(t.Vchannels))
	}
	if cb, ok := broadcastCallbacks[t.MessageType]; ok {
		// The callback works on a scratch copy so a refusal changes nothing
		// but the failure record.
		scratch := *next
		if r := cb(&scratch, t, c.ProposedAtUnixMs); r != nil && r.Rejection != nil {
			nt := proto.Clone(t).(*logpb.BroadcastTask)
			nt.CallbackAttempts++
			nt.LastError, nt.LastErrorMs = r.Rejection.Message, c.ProposedAtUnixMs
			next.bc.put(nt)
			return completion(false, r.Rejection.Message)
		}
		*next = scratch
	}
	t, _ = next.bc.tasks.Get(id) // the callback may not touch tasks, but read afresh anyway
	tombstone(next, t, c.ProposedAtUnixMs, "")
	return completion(true, "")
}

func completion(tombstoned bool, callbackErr string) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_Completion{Completion: &logpb.BroadcastCompletion{Tombstoned: tombstoned, CallbackError: callbackErr}}}
}

// tombstone finishes t. The payload is dropped: a tombstone answers
// duplicates from its checkpoints and is never appended again, and tombstones
// are kept by the thousand (the idempotency window), so their payloads would
// dominate the state's size.
func tombstone(next *State, t *logpb.BroadcastTask, nowMs int64, abandonReason string) {
	payload := t.Payload
	t.Payload = nil // not cloned: the clone below must not copy it
	nt := proto.Clone(t).(*logpb.BroadcastTask)
	t.Payload = payload
	nt.State = logpb.BroadcastState_BROADCAST_TOMBSTONE
	nt.TombstonedMs = nowMs
	nt.AbandonedReason = abandonReason
	nt.TombstoneSeq = next.bc.meta.NextTombstoneSeq
	m := proto.Clone(next.bc.meta).(*logpb.BroadcastMeta)
	m.NextTombstoneSeq++
	next.bc.meta = m
	next.bc.put(nt)
}

// applyAbandonBroadcast: an operator gives up on a pending task; it becomes
// a TOMBSTONE without its callback and with the reason recorded.
func applyAbandonBroadcast(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.AbandonBroadcast)
	t, ok := next.bc.tasks.Get(b.BroadcastId)
	if !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "broadcast %d does not exist", b.BroadcastId)
	}
	if t.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "broadcast %d is already finished", b.BroadcastId)
	}
	tombstone(next, t, c.ProposedAtUnixMs, b.Reason)
	return accepted()
}

// applyPruneBroadcastTombstones drops tombstones from the oldest while there
// are more than max_count or the oldest is past max_lifetime_ms in replicated
// time (docs/semantics.md#tombstones). Dropping ends the idempotency window.
func applyPruneBroadcastTombstones(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.PruneBroadcastTombstones)
	cutoff := c.ProposedAtUnixMs - b.MaxLifetimeMs
	if cutoff > c.ProposedAtUnixMs { // wrapped around (lifetime > 0)
		cutoff = math.MinInt64
	}
	dropped := 0
	for next.bc.tombstones.Len() > 0 {
		it := next.bc.tombstones.Iterator()
		_, id, _ := it.Next()
		t, _ := next.bc.tasks.Get(id)
		if next.bc.tombstones.Len() <= int(b.MaxCount) && t.TombstonedMs > cutoff {
			break
		}
		next.bc.drop(t)
		dropped++
	}
	return &logpb.Result{Value: &logpb.Result_Number{Number: uint64(dropped)}}
}
