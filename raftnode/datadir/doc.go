// Package datadir owns a coordd member's data dir: the files raft keeps
// its state in and the records coordd keeps beside them, and every check
// made on them before raft may start. It runs no raft: package raftnode
// opens a data dir here and wires the stores Open hands back into
// hashicorp/raft, and the offline commands (coordd inspect, restore)
// use it without a node.
//
// What a data dir holds, and the file that owns each:
//   - identity.json, the member's identity (member ID, incarnation, cluster
//     ID), written before anything else (identity.go);
//   - raft.db, raft-boltdb/v2: the stable store (term and vote) always,
//     and the log for a data dir that records bolt as its log store; the
//     log lives in raft-wal segments under wal/ for a new data dir
//     (logstore.go: the choice is recorded in raft.db and never changes);
//   - vote.json, each durable term and vote again, so a raft.db that went
//     back is refused instead of voting twice (vote_record.go), and the
//     wait that holds a failing term or vote write rather than handing raft
//     an error it would panic on (stable_wait.go);
//   - log-reach, how far the log reached, so a log that lost its tail is
//     refused (log_reach.go);
//   - snapshots/, raft's file snapshot store, with the leftovers of failed
//     snapshots removed and its listing cached (snapshot_cleanup.go,
//     snapshot_list_cache.go).
//
// Open checks all of it before raft touches it (storage.go,
// storage_check.go, storage_check_wal.go): damage, a lost raft state, a
// data dir of another member or one in use by another process is refused
// in one line naming the way out (docs/operations.md#replacing-a-member).
// InspectDataDir reads a stopped member's data dir (inspect.go);
// RestoreDataDir seeds a new member's from a backup, with optional
// allocator floors (restore.go, restore_floors.go). Rewriting a lost
// quorum's configuration replays the log through the state machine, so it
// stays with the node (raftnode.RecoverDataDir).
//
// Parts of this package reason about hashicorp/raft's and raft-wal's
// internals in the versions go.mod requires (raftnode's
// version_tripwire_test.go names the files).
package datadir
