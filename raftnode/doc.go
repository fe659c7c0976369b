// Package raftnode owns consensus wiring: a hashicorp/raft instance over
// the stores of a member's data dir (package raftnode/datadir opens and
// checks it: identity, raft-wal or bolt log, raft.db stable store, vote
// and log-reach records, snapshots) and a TCP transport with a member
// handshake, plus the four things coordd builds on top of it: batched
// proposals, linearizable reads, leadership tracking and membership
// changes.
//
// The log store is raft-wal for a new data dir and bolt (raft.db) for a
// data dir that records bolt (made by an older coordd, or first opened
// with Config.LogStore bolt); docs/operations.md#raft-log-store.
//
// Threading model:
//   - raft's FSM goroutine is the only caller of fsmAdapter.ApplyBatch,
//     Snapshot and Restore. It publishes each new fsm.State through an
//     atomic pointer; readers load it without locks.
//   - One batcher goroutine turns concurrent Propose calls into log entries
//     (group commit), with at most Config.MaxInflightEntries entries in flight,
//     and one more for a chained proposal at the head of the queue
//     (commands.Chained).
//   - One goroutine drains raft's NotifyCh (buffered, never blocked) and runs
//     the establish/revoke sequence; leader routines run under a context that
//     is cancelled on step-down, and revoke waits for them to exit.
//
// Correctness rules kept here (docs/architecture.md#rules):
//   - A proposal is acknowledged only after it is committed and applied.
//     ErrLeadershipLost, shutdown and a context that ends while waiting mean
//     the outcome is unknown (ErrOutcomeUnknown), never "failed".
//   - Reads are served linearizably only after this leader has committed an
//     entry of its own term (LeaderEstablished after a Barrier).
//   - An entry the FSM cannot apply stops the process: a replica that
//     skipped it would diverge.
//   - A term or vote write returns to raft only once it is durable (raft
//     panics on an error, and a vote it believed stored could be given
//     twice): a failing one waits, and the member takes no part meanwhile
//     (datadir/stable_wait.go, docs/operations.md#full-disk).
package raftnode
