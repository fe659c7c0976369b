package raftnode

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// watchedLogStore remembers whether the member's last attempt to append to
// its log failed (a full disk, an I/O error). Raft only logs such failures;
// a follower that cannot append keeps answering heartbeats and its own
// commit index stops where its log stopped, so without this it would look
// healthy while it falls ever further behind.
type watchedLogStore struct {
	raft.LogStore

	mu           sync.Mutex
	lastErr      error
	failingSince time.Time
}

func (s *watchedLogStore) StoreLog(l *raft.Log) error {
	return s.record(s.LogStore.StoreLog(l))
}

func (s *watchedLogStore) StoreLogs(ls []*raft.Log) error {
	return s.record(s.LogStore.StoreLogs(ls))
}

func (s *watchedLogStore) record(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.lastErr, s.failingSince = nil, time.Time{}
	case s.lastErr == nil:
		s.lastErr, s.failingSince = err, time.Now()
	default:
		s.lastErr = err
	}
	return err
}

// AppendError reports since when appends to this member's raft log have
// been failing and why the last one failed, or a nil error once an append
// succeeds.
func (n *Node) AppendError() (since time.Time, err error) {
	n.logs.mu.Lock()
	defer n.logs.mu.Unlock()
	if n.logs.lastErr == nil {
		return time.Time{}, nil
	}
	return n.logs.failingSince, fmt.Errorf("cannot append to its raft log: %w", n.logs.lastErr)
}
