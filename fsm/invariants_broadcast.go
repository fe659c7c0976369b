package fsm

import (
	"fmt"

	"github.com/coordd/coordd/commands/logpb"
)

// checkBroadcastInvariants verifies the broadcaster's structural invariants
// (docs/semantics.md#broadcast-invariants) on one state: acked checkpoints are
// a subset of the targets, one per VChannel; tombstones and pending tasks are
// counted and indexed consistently; every idempotency entry points at the task
// holding it.
func (s *State) checkBroadcastInvariants() error {
	pending, tombstones := 0, 0
	for it := s.bc.tasks.Iterator(); !it.Done(); {
		id, t, _ := it.Next()
		if t.Id != id || id == 0 || id >= s.alloc.nextID {
			return fmt.Errorf("broadcast record %d: id %d, next id %d", id, t.Id, s.alloc.nextID)
		}
		seen := map[string]bool{}
		for _, cp := range t.Acked {
			if seen[cp.Vchannel] || !isTarget(t, cp.Vchannel) {
				return fmt.Errorf("broadcast %d: ack for %s is repeated or not a target", id, cp.Vchannel)
			}
			seen[cp.Vchannel] = true
		}
		if t.IdempotencyKey != "" {
			if holder, ok := s.bc.idem.Get(idemScope(t.MessageType, t.IdempotencyKey)); !ok || holder != id {
				return fmt.Errorf("broadcast %d: its idempotency scope is held by %d", id, holder)
			}
		}
		switch t.State {
		case logpb.BroadcastState_BROADCAST_TOMBSTONE:
			tombstones++
			if got, ok := s.bc.tombstones.Get(t.TombstoneSeq); !ok || got != id {
				return fmt.Errorf("tombstone %d is not indexed at seq %d", id, t.TombstoneSeq)
			}
			if t.TombstoneSeq == 0 || t.TombstoneSeq >= s.bc.meta.NextTombstoneSeq {
				return fmt.Errorf("tombstone sequence %d of broadcast %d is not in 1..%d", t.TombstoneSeq, id, s.bc.meta.NextTombstoneSeq-1)
			}
			if t.AbandonedReason == "" && !AllAcked(t) {
				return fmt.Errorf("broadcast %d was completed with %d of %d targets acked", id, len(t.Acked), len(t.Vchannels))
			}
		case logpb.BroadcastState_BROADCAST_PENDING, logpb.BroadcastState_BROADCAST_REPLICATED:
			pending++
		default:
			return fmt.Errorf("broadcast %d in state %s", id, t.State)
		}
	}
	if pending != s.bc.pending || tombstones != s.bc.tombstones.Len() {
		return fmt.Errorf("broadcast counts: %d pending (recorded %d), %d tombstones (indexed %d)",
			pending, s.bc.pending, tombstones, s.bc.tombstones.Len())
	}
	for it := s.bc.idem.Iterator(); !it.Done(); {
		scope, id, _ := it.Next()
		t, ok := s.bc.tasks.Get(id)
		if !ok || idemScope(t.MessageType, t.IdempotencyKey) != scope {
			return fmt.Errorf("idempotency scope %q points at %d, which does not hold it", scope, id)
		}
	}
	return nil
}
