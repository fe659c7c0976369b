package raftnode

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode/datadir"
)

// watchedLogStore remembers whether the member's last attempt to append to
// its log failed (a full disk, an I/O error). Raft only logs such failures;
// a follower that cannot append keeps answering heartbeats and its own
// commit index stops where its log stopped, so without this it would look
// healthy while it falls ever further behind.
type watchedLogStore struct {
	raft.LogStore

	// appends counts successful log writes: each is one append to the log
	// store, so one fsync of it (raft-wal, a new data dir's store: a
	// segment; bolt, for a data dir that records it: raft.db).
	appends atomic.Uint64

	// fault is the current run of failed appends (StorageFaults).
	fault datadir.WriteFault
}

// IsMonotonic passes on whether the wrapped store tolerates no gaps
// (raft.MonotonicLogStore: raft-wal). raft checks it on the store it is
// given: hidden here, a raft-wal follower that installs a snapshot past
// the end of its log would keep that log and then fail every append after
// the snapshot as out of order, instead of having raft clear the log.
func (s *watchedLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (s *watchedLogStore) StoreLog(l *raft.Log) error {
	return s.record(s.LogStore.StoreLog(l))
}

func (s *watchedLogStore) StoreLogs(ls []*raft.Log) error {
	return s.record(s.LogStore.StoreLogs(ls))
}

// LogWrites is how many successful writes this member made to its raft
// log since it opened: each is one append to its log store, so one fsync
// of it (a raft-wal segment, or raft.db on a data dir that records bolt;
// the group-commit denominator in bench/RESULTS.md).
func (n *Node) LogWrites() uint64 { return n.logs.appends.Load() }

func (s *watchedLogStore) record(err error) error {
	if err == nil {
		s.appends.Add(1)
	}
	s.fault.Record(err, time.Now())
	return err
}

// AppendError reports since when appends to this member's raft log have
// been failing and why the last one failed, or a nil error once an append
// succeeds.
func (n *Node) AppendError() (since time.Time, err error) {
	f, ok := n.logs.fault.Fault(datadir.WriteLog)
	if !ok {
		return time.Time{}, nil
	}
	return f.Since, fmt.Errorf("cannot append to its raft log: %w", f.Err)
}
