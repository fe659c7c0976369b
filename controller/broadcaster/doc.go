// Package broadcaster is the leader side of coordd's broadcaster
// (docs/semantics.md#broadcaster):
// atomic, ordered, idempotent DDL/DCL broadcast to many VChannels.
//
// The FSM holds the truth — tasks from PENDING to TOMBSTONE, per-VChannel
// checkpoints, the idempotency index — and runs every guard. The Manager
// keeps only leader memory, rebuilt by Run on every leadership:
//
//   - a resource-key lock table (shared/exclusive per key, FIFO per key,
//     keys acquired in the normalized order and released in reverse; waits
//     honour the caller's deadline and report the key and the wait);
//   - a scheduler with bounded workers that appends each task's message to
//     the streaming node owning each target's PChannel at its current term,
//     commits the checkpoints (FastAck) unless the task acks from the nodes
//     (ack_sync_up), then commits CompleteBroadcast — the ack callback and
//     the TOMBSTONE in one command, which also carries the last FastAck
//     checkpoints when a step's appends ack every target left, so those
//     acks cost no round of their own — retrying failures with exponential
//     backoff (10 ms ×2 up to 10 s, from 10 ms again after a step that
//     appended any target) forever;
//   - the tombstone GC loop.
//
// A Broadcast holds its keys from before CreateBroadcast until its task is
// a TOMBSTONE, so conflicting tasks get increasing IDs, land in that order
// in every shared VChannel and run their callbacks in that order. It hands
// them on early, once its completion is queued for the log: the next
// conflicting Broadcast's create is ordered behind it (after_broadcasts)
// and Apply refuses it until the task is a tombstone (handoff.go). On a new
// leadership every PENDING task is re-locked before any new Broadcast is
// admitted. A callback that keeps failing stays visible in the FSM (last
// error, attempts) and in a metric until an operator retries or abandons it.
package broadcaster
