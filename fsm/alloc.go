package fsm

import (
	"math"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// applyExtendTSOWindow raises the timestamp window's committed limit. The
// limit only grows: a leader never hands out a timestamp at or above the
// committed limit, and a new leader starts above it, so timestamps increase
// across any sequence of leaders.
func applyExtendTSOWindow(next *State, c commands.Command) *logpb.Result {
	limit := c.Body.(*logpb.ExtendTSOWindow).LimitPhysicalMs
	if limit <= next.alloc.tsoLimitPhysicalMs {
		return reject(logpb.RejectCode_REJECT_STALE, "tso window limit %d does not exceed the committed limit %d",
			limit, next.alloc.tsoLimitPhysicalMs)
	}
	next.alloc.tsoLimitPhysicalMs = limit
	return &logpb.Result{Value: &logpb.Result_Number{Number: uint64(limit)}}
}

// applyReserveIDs hands the next `count` IDs to the proposing leader. A
// reserved range is never handed out again, whether or not it is used.
func applyReserveIDs(next *State, c commands.Command) *logpb.Result {
	count := c.Body.(*logpb.ReserveIDs).Count
	first := next.alloc.nextID
	if count > math.MaxUint64-first {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "id space exhausted: next %d, asked for %d", first, count)
	}
	next.alloc.nextID = first + count
	return &logpb.Result{Value: &logpb.Result_IdRange{IdRange: &logpb.IDRange{First: first, Count: count}}}
}

// applyRaiseAllocatorFloors moves the next ID and the TSO limit up to the
// given floors (a lower or zero floor leaves its value). `coordd restore`
// writes it first, so the restored cluster's first reservation and first
// window start above anything the old cluster may have handed out after
// the backup (docs/operations.md#backup-and-restore).
func applyRaiseAllocatorFloors(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.RaiseAllocatorFloors)
	next.alloc.nextID = max(next.alloc.nextID, b.NextId)
	next.alloc.tsoLimitPhysicalMs = max(next.alloc.tsoLimitPhysicalMs, b.TsoLimitPhysicalMs)
	return &logpb.Result{Value: &logpb.Result_IdRange{IdRange: &logpb.IDRange{First: next.alloc.nextID}}}
}
