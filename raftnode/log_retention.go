package raftnode

import (
	"github.com/hashicorp/raft"
)

// retainingLogStore keeps the log back to the member's oldest retained
// snapshot. raft compacts the log after each snapshot down to TrailingLogs
// entries behind its head, which says nothing about the previous snapshot:
// snapshots lie SnapshotThreshold plus one SnapshotInterval's entries apart,
// so at any TrailingLogs a busy member could lose the entries between the
// two, and with them the fallback Open promises when the newest snapshot is
// unreadable (raft restores the older one and replays the log after it).
// Clamping raft's compaction at the older snapshot's index keeps that
// fallback whatever the flags say, at the cost of up to one snapshot
// interval of extra log.
//
// Only compaction is clamped: it deletes a prefix (from the first index)
// that ends at or below the newest snapshot. raft's other DeleteRange,
// removing a conflicting suffix of uncommitted entries, lies above the
// newest snapshot (which holds only applied entries) and passes through
// unchanged.
type retainingLogStore struct {
	raft.LogStore
	snaps raft.SnapshotStore
}

func (s *retainingLogStore) DeleteRange(lo, hi uint64) error {
	if s.isCompaction(lo, hi) {
		if keep, ok := s.fallbackIndex(); ok && hi > keep {
			hi = keep
		}
	}
	if hi < lo {
		return nil
	}
	return s.LogStore.DeleteRange(lo, hi)
}

// isCompaction reports whether deleting lo..hi is raft compacting its log:
// a prefix (from the first index) ending at or below the newest snapshot,
// and not the whole log (what raft deletes after installing a snapshot the
// log does not reach: those entries lie before a snapshot from another
// member, and a monotonic log store must not keep them).
func (s *retainingLogStore) isCompaction(lo, hi uint64) bool {
	first, err := s.LogStore.FirstIndex()
	if err != nil || lo != first || hi > s.newestIndex() {
		return false
	}
	last, err := s.LogStore.LastIndex()
	return err == nil && hi < last
}

// IsMonotonic passes on whether the wrapped store tolerates gaps
// (raft.MonotonicLogStore).
func (s *retainingLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// fallbackIndex is the index of the oldest retained snapshot when there is
// more than one (with one, there is nothing to fall back to).
func (s *retainingLogStore) fallbackIndex() (uint64, bool) {
	snaps, err := s.snaps.List()
	if err != nil || len(snaps) < 2 {
		return 0, false
	}
	return snaps[len(snaps)-1].Index, true
}

func (s *retainingLogStore) newestIndex() uint64 {
	snaps, err := s.snaps.List()
	if err != nil || len(snaps) == 0 {
		return 0
	}
	return snaps[0].Index
}
