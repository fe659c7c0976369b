package datadir

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// What the consensus wiring (package raftnode) takes from an opened data
// dir. Each store is the checked one Open returned; closing them is
// Storage.Close's job alone.

// Identity returns the member's durable identity.
func (s *Storage) Identity() Identity { return s.ident.get() }

// SetClusterID durably records the cluster this member bootstraps or joins.
// A member that already belongs to another cluster refuses.
func (s *Storage) SetClusterID(clusterID string) error { return s.ident.setClusterID(clusterID) }

// Dir is the data dir.
func (s *Storage) Dir() string { return s.dir }

// Logs is the log store raft writes through: the entries' store (raft.db
// or wal/) behind the writer of LogReachFile.
func (s *Storage) Logs() raft.LogStore { return s.logs }

// Stable is the stable store raft is given: raft.db, with every durable
// term and vote recorded in VoteFile too, and a failing term or vote write
// waited out rather than returned (stable_wait.go).
func (s *Storage) Stable() raft.StableStore { return s.stable }

// BoltStable is raft.db as a plain stable store, for reads (and for raft's
// offline RecoverCluster, which writes no term or vote).
func (s *Storage) BoltStable() raft.StableStore { return s.store }

// Snapshots is the snapshot store: raft's file store, with leftovers of
// failed snapshots removed and its listing cached.
func (s *Storage) Snapshots() *SnapshotCache { return s.snaps }

// SetStableLogger names where the stable store's waits are logged.
func (s *Storage) SetStableLogger(l hclog.Logger) { s.stable.wait.logger = hclogOrNull(l) }

// StableWaiting says whether a term or vote write is being waited out now
// (raft answers nothing until it returns).
func (s *Storage) StableWaiting() bool { return s.stable.wait.blocked() }

// StopStableWaits ends every wait for a term or vote write, now and later:
// the waiting goroutine (raft's) exits without the write (shutdown).
func (s *Storage) StopStableWaits() { s.stable.wait.stopWaiting() }
