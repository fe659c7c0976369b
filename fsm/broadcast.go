package fsm

import (
	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands/logpb"
)

// MaxPendingBroadcasts bounds tasks not yet tombstoned.
const MaxPendingBroadcasts = 65536

// broadcastState is the broadcaster subsystem (docs/semantics.md#broadcaster):
// tasks from PENDING to TOMBSTONE, their acked checkpoints, and the
// idempotency index. Lock tables and schedulers are leader memory rebuilt from
// this.
type broadcastState struct {
	meta  *logpb.BroadcastMeta
	tasks *immutable.SortedMap[uint64, *logpb.BroadcastTask]
	// Derived (rebuilt on restore, never written to snapshots):
	idem       *immutable.SortedMap[string, uint64] // idemScope → broadcast ID, tombstones included
	tombstones *immutable.SortedMap[uint64, uint64] // tombstone_seq → broadcast ID, oldest first
	pending    int
}

func newBroadcastState() broadcastState {
	return broadcastState{
		meta:       &logpb.BroadcastMeta{NextTombstoneSeq: 1},
		tasks:      immutable.NewSortedMap[uint64, *logpb.BroadcastTask](immutable.NewComparer[uint64](0)),
		idem:       immutable.NewSortedMap[string, uint64](nil),
		tombstones: immutable.NewSortedMap[uint64, uint64](immutable.NewComparer[uint64](0)),
	}
}

// idemScope is the dedup scope of an idempotency key: (message type,
// scoped key). The separator cannot occur in a message type.
func idemScope(messageType, key string) string { return messageType + "\x00" + key }

// put stores t and keeps the derived indexes in step.
func (b *broadcastState) put(t *logpb.BroadcastTask) {
	old, had := b.tasks.Get(t.Id)
	if had && old.State != logpb.BroadcastState_BROADCAST_TOMBSTONE {
		b.pending--
	}
	b.tasks = b.tasks.Set(t.Id, t)
	if t.IdempotencyKey != "" {
		b.idem = b.idem.Set(idemScope(t.MessageType, t.IdempotencyKey), t.Id)
	}
	if t.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
		b.tombstones = b.tombstones.Set(t.TombstoneSeq, t.Id)
	} else {
		b.pending++
	}
}

// drop forgets a tombstoned task entirely (its idempotency window ends).
func (b *broadcastState) drop(t *logpb.BroadcastTask) {
	b.tasks = b.tasks.Delete(t.Id)
	b.tombstones = b.tombstones.Delete(t.TombstoneSeq)
	if t.IdempotencyKey != "" {
		scope := idemScope(t.MessageType, t.IdempotencyKey)
		if id, ok := b.idem.Get(scope); ok && id == t.Id {
			b.idem = b.idem.Delete(scope)
		}
	}
}

// BroadcastTasks returns every task (pending and tombstoned) by ID.
func (s *State) BroadcastTasks() []*logpb.BroadcastTask {
	out := make([]*logpb.BroadcastTask, 0, s.bc.tasks.Len())
	for it := s.bc.tasks.Iterator(); !it.Done(); {
		_, t, _ := it.Next()
		out = append(out, t)
	}
	return out
}

// PendingBroadcasts returns the tasks not yet tombstoned, by ID.
func (s *State) PendingBroadcasts() []*logpb.BroadcastTask {
	out := make([]*logpb.BroadcastTask, 0, s.bc.pending)
	for it := s.bc.tasks.Iterator(); !it.Done(); {
		_, t, _ := it.Next()
		if t.State != logpb.BroadcastState_BROADCAST_TOMBSTONE {
			out = append(out, t)
		}
	}
	return out
}

// BroadcastTask looks up one task.
func (s *State) BroadcastTask(id uint64) (*logpb.BroadcastTask, bool) { return s.bc.tasks.Get(id) }

// BroadcastByIdempotencyKey finds the task holding a dedup scope.
func (s *State) BroadcastByIdempotencyKey(messageType, key string) (*logpb.BroadcastTask, bool) {
	id, ok := s.bc.idem.Get(idemScope(messageType, key))
	if !ok {
		return nil, false
	}
	return s.bc.tasks.Get(id)
}

// TombstoneCount is the number of tombstoned tasks kept.
func (s *State) TombstoneCount() int { return s.bc.tombstones.Len() }

// FlushAllTicks returns the per-PChannel time ticks recorded by the last
// completed FlushAll broadcast and its ID.
func (s *State) FlushAllTicks() (broadcastID uint64, ticks []*logpb.PChannelTimeTick) {
	return s.bc.meta.FlushAllBroadcastId, s.bc.meta.FlushAll
}

// Acked returns the checkpoint of vchannel in t, if acked.
func Acked(t *logpb.BroadcastTask, vchannel string) (*logpb.VChannelCheckpoint, bool) {
	for _, cp := range t.Acked {
		if cp.Vchannel == vchannel {
			return cp, true
		}
	}
	return nil, false
}

// AllAcked reports whether every target of t is acked.
func AllAcked(t *logpb.BroadcastTask) bool { return len(t.Acked) == len(t.Vchannels) }
