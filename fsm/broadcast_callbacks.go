package fsm

import (
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// broadcastCallback applies a broadcast's effect on coordd's own state once
// every target has acked. It returns a rejection to refuse (the task stays
// pending and is retried), or nil/success. nowMs is the leader-stamped time
// of the CompleteBroadcast command. Callbacks must be idempotent.
type broadcastCallback func(next *State, t *logpb.BroadcastTask, nowMs int64) *logpb.Result

// broadcastCallbacks maps message types to their callbacks. A later
// subsystem adds its own line here; message types without one are recorded
// and acked with no callback.
var broadcastCallbacks = map[string]broadcastCallback{
	vocab.MsgCreateCollection:     createCollectionCallback,
	vocab.MsgDropCollection:       dropCollectionCallback,
	vocab.MsgAlterReplicateConfig: alterReplicateConfigCallback,
	vocab.MsgFlushAll:             flushAllCallback,
}

// checkBuiltinPayload returns why a built-in type's payload is unusable
// ("" when fine, or for types without a callback).
func checkBuiltinPayload(messageType string, payload []byte) string {
	if err := commands.ValidateBuiltinPayload(messageType, payload); err != nil {
		return strings.TrimPrefix(err.Error(), commands.ErrInvalid.Error()+": ")
	}
	return ""
}

// decodePayload decodes the payload of a task for its callback, or refuses.
//
// Every task Apply creates decodes: applyCreateBroadcast admits a built-in
// type only after commands.Validate (in dispatch) and
// CheckBroadcastCreation have decoded its payload with the same message
// type (commands.ValidateBuiltinPayload), and no command changes a task's
// payload afterwards. Only a task read from a damaged snapshot can fail
// here. It then fails its callback like any refusal: the task stays
// pending with the error recorded until an operator abandons it, instead of
// running its callback on a half-decoded message. The message leaves out
// the decoder's error text, which is not stable across protobuf builds,
// so every replica records the same bytes.
func decodePayload(t *logpb.BroadcastTask, m proto.Message) *logpb.Result {
	if err := proto.Unmarshal(t.Payload, m); err != nil {
		return reject(logpb.RejectCode_REJECT_INVALID, "broadcast %d: the %s payload does not decode", t.Id, t.MessageType)
	}
	return nil
}

// createCollectionCallback records the collection on exactly the
// VChannels its message went to (the task's targets without the
// CChannel). Creation checked them; a collection allocated meanwhile on
// other VChannels (AllocVirtualChannels does not take resource keys) is a
// conflict the task reports until an operator abandons it.
func createCollectionCallback(next *State, t *logpb.BroadcastTask, nowMs int64) *logpb.Result {
	var p logpb.CreateCollectionPayload
	if r := decodePayload(t, &p); r != nil {
		return r
	}
	vchs := collectionVChannels(next, t.Vchannels)
	if existing, ok := next.ch.collections.Get(p.CollectionId); ok {
		if sameSet(existing.Vchannels, vchs) {
			return accepted()
		}
		return reject(logpb.RejectCode_REJECT_CONFLICT, "collection %d has vchannels %v, but its CreateCollection went to %v",
			p.CollectionId, existing.Vchannels, vchs)
	}
	if next.ch.collections.Len() >= MaxCollections {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "%d collections already have vchannels (max %d)", next.ch.collections.Len(), MaxCollections)
	}
	names := append([]string(nil), vchs...)
	sort.Slice(names, func(i, j int) bool { return shardOf(names[i]) < shardOf(names[j]) })
	recordCollection(next, p.CollectionId, names)
	storeCreationCheckpoints(next, t, nowMs)
	return accepted()
}

// storeCreationCheckpoints gives each VChannel the collection was just
// recorded on a checkpoint at its CreateCollection message (the acked
// position), as Milvus's DataCoord stores the collection's start
// positions: no row of the VChannel can precede that message (inserts need
// the recorded collection, and their timestamps are fresh TSO timestamps
// taken after it), so a recovery seeks there until the owner reports a
// checkpoint, never past a row coordd has no position for. An acked
// position outside the position bounds, or a VChannel that already has a
// checkpoint, is left alone.
func storeCreationCheckpoints(next *State, t *logpb.BroadcastTask, nowMs int64) {
	for _, a := range t.Acked {
		if _, ok := next.knownVChannel(a.Vchannel); !ok {
			continue // the CChannel, or not a VChannel of this collection
		}
		if _, had := next.seg.cps.Get(a.Vchannel); had {
			continue
		}
		pos := Position{Term: a.Term, Offset: a.Offset, Timestamp: a.TimeTick}
		if pos.IsZero() || next.checkPosition("creation checkpoint", a.Vchannel, pos) != nil {
			continue
		}
		v := next.internVChannel(a.Vchannel)
		next.seg.cps = next.seg.cps.Set(v, &ChannelCheckpoint{VChannel: v, Position: pos, PChannelTerm: a.Term, UpdatedMs: nowMs})
	}
}

// shardOf is the shard index at the end of a VChannel name ("…v<i>").
func shardOf(v string) int {
	i := strings.LastIndexByte(v, 'v')
	n, _ := strconv.Atoi(v[i+1:])
	return n
}

// dropCollectionCallback drops the collection's VChannels (a no-op if it
// has none).
func dropCollectionCallback(next *State, t *logpb.BroadcastTask, nowMs int64) *logpb.Result {
	var p logpb.DropCollectionPayload
	if r := decodePayload(t, &p); r != nil {
		return r
	}
	return dropVirtualChannels(next, p.CollectionId, nowMs)
}

// alterReplicateConfigCallback installs the broadcast configuration.
func alterReplicateConfigCallback(next *State, t *logpb.BroadcastTask, _ int64) *logpb.Result {
	var cfg logpb.ReplicateConfiguration
	if r := decodePayload(t, &cfg); r != nil {
		return r
	}
	return updateReplicateConfiguration(next, &cfg)
}

// flushAllCallback records, per PChannel, the time tick at which the
// FlushAll message landed, for a later flush-state query.
func flushAllCallback(next *State, t *logpb.BroadcastTask, _ int64) *logpb.Result {
	per := map[string]uint64{}
	for _, cp := range t.Acked {
		p := vocab.PChannelOf(cp.Vchannel)
		per[p] = max(per[p], cp.TimeTick)
	}
	ticks := make([]*logpb.PChannelTimeTick, 0, len(per))
	for p, tt := range per {
		ticks = append(ticks, &logpb.PChannelTimeTick{Pchannel: p, TimeTick: tt})
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Pchannel < ticks[j].Pchannel })
	m := proto.Clone(next.bc.meta).(*logpb.BroadcastMeta)
	m.FlushAllBroadcastId, m.FlushAll = t.Id, ticks
	next.bc.meta = m
	return accepted()
}
