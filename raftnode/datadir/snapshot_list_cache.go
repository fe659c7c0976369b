package datadir

import (
	"sync"

	"github.com/hashicorp/raft"
)

// SnapshotCache remembers the snapshot store's List between snapshots.
// raft's FileSnapshotStore answers List by reading the snapshot directory
// and decoding every snapshot's meta.json, and coordd asks on hot paths:
// Status reports the newest snapshot on every call, log compaction
// (retainingLogStore) asks on every DeleteRange, EntryTerm on a log miss.
//
// The cached list is exact while this process is the store's only writer
// (a data dir is locked to one member process: storage.go): the list can
// only change when a snapshot is written (Create, by raft's own snapshots
// and by InstallSnapshot on a follower), and FileSnapshotStore reaps old
// snapshots inside the sink's Close. So the cache is dropped whenever a
// sink created here is closed or cancelled, and refilled by the next List.
type SnapshotCache struct {
	raft.SnapshotStore
	mu     sync.Mutex
	valid  bool
	cached []*raft.SnapshotMeta
}

func newSnapshotCache(s raft.SnapshotStore) *SnapshotCache {
	return &SnapshotCache{SnapshotStore: s}
}

// List returns the snapshots newest first, as the wrapped store does. The
// metas are copies: callers may not change what the next caller sees.
func (c *SnapshotCache) List() ([]*raft.SnapshotMeta, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(); err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, len(c.cached))
	for i, m := range c.cached {
		cp := *m
		out[i] = &cp
	}
	return out, nil
}

// NewestIndex is the index of the newest snapshot (false: none), from
// the same cached list as List, without copying it.
func (c *SnapshotCache) NewestIndex() (uint64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.loadLocked(); err != nil {
		return 0, false, err
	}
	if len(c.cached) == 0 {
		return 0, false, nil
	}
	return c.cached[0].Index, true, nil
}

// Create starts a snapshot whose Close or Cancel drops the cached list.
func (c *SnapshotCache) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := c.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &invalidatingSink{SnapshotSink: sink, cache: c}, nil
}

func (c *SnapshotCache) invalidate() {
	c.mu.Lock()
	c.valid, c.cached = false, nil
	c.mu.Unlock()
}

type invalidatingSink struct {
	raft.SnapshotSink
	cache *SnapshotCache
}

func (s *invalidatingSink) Close() error {
	defer s.cache.invalidate()
	return s.SnapshotSink.Close()
}

func (s *invalidatingSink) Cancel() error {
	defer s.cache.invalidate()
	return s.SnapshotSink.Cancel()
}

// loadLocked lists the wrapped store's snapshots unless the cached list is
// still valid (no snapshot created or removed since).
func (c *SnapshotCache) loadLocked() error {
	if c.valid {
		return nil
	}
	metas, err := c.SnapshotStore.List()
	if err != nil {
		return err
	}
	c.cached, c.valid = metas, true
	return nil
}
