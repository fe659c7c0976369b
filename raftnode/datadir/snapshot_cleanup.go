package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// snapshotTmpSuffix marks a snapshot directory raft's FileSnapshotStore is
// still writing: it renames the directory without it once the snapshot is
// complete and synced, so a directory with it never holds a usable snapshot.
const snapshotTmpSuffix = ".tmp"

// cleaningSnapshotStore removes what a failed snapshot leaves behind and
// remembers whether snapshot writes are failing (StorageFaults).
//
// raft's FileSnapshotStore (v1.8.0) leaves its temporary directory in place
// when Create fails after making it (the metadata or the state file cannot
// be written), when Close fails to write the metadata or to rename it, and
// when Cancel fails to flush the buffered state (the usual end of a Persist
// that ran out of space: the partial state.bin stays). raft takes a
// snapshot every SnapshotInterval while the log is past the threshold, so
// on a full disk every attempt left one more directory, and space an
// operator freed went into the next one. Nothing in a temporary directory
// is ever read (List skips them), so removing it loses nothing.
//
// Invariant: apart from the sinks handed out and not yet closed or
// cancelled (open), no temporary directory outlives the call that made it.
// Create is serialised, so while one runs no other snapshot is half-made.
type cleaningSnapshotStore struct {
	raft.SnapshotStore
	dir    string // the snapshots directory
	logger hclog.Logger
	now    func() time.Time

	mu   sync.Mutex
	open map[string]bool // temporary directory names of unfinished sinks

	fault WriteFault
}

// newCleaningSnapshotStore wraps store, whose snapshots live in
// dataDir/snapshots, and removes the temporary directories an earlier run
// left there (the data dir is locked to this process: none is in use).
func newCleaningSnapshotStore(store raft.SnapshotStore, dataDir string, logger hclog.Logger) *cleaningSnapshotStore {
	c := &cleaningSnapshotStore{
		SnapshotStore: store,
		dir:           filepath.Join(dataDir, "snapshots"),
		logger:        hclogOrNull(logger),
		now:           time.Now,
		open:          map[string]bool{},
	}
	c.mu.Lock()
	c.removeLeftoversLocked("left by an earlier run")
	c.mu.Unlock()
	return c
}

// Create starts a snapshot; when it fails, it removes the temporary
// directory it made.
func (c *cleaningSnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sink, err := c.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		c.recordLocked(err)
		c.removeLeftoversLocked("left by a snapshot that could not be created")
		return nil, fmt.Errorf("create snapshot %d-%d: %w", term, index, err)
	}
	c.open[sink.ID()+snapshotTmpSuffix] = true
	return &cleaningSink{SnapshotSink: sink, store: c}, nil
}

// finish forgets a closed or cancelled sink and removes its temporary
// directory when it is still there (it is not after a successful Close,
// which renamed it).
func (c *cleaningSnapshotStore) finish(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := id + snapshotTmpSuffix
	delete(c.open, name)
	c.removeLocked(name, "left by a snapshot that failed")
}

// recordLocked notes a failed snapshot write, logging the start of a run of
// failures.
func (c *cleaningSnapshotStore) recordLocked(err error) {
	if began, _ := c.fault.Record(err, c.now()); began {
		c.logger.Error("cannot write snapshots; the log is not compacted until one succeeds", "error", err,
			"disk_full", IsDiskFull(err))
	}
}

func (c *cleaningSnapshotStore) recordDone() {
	if _, ended := c.fault.Record(nil, c.now()); ended {
		c.logger.Info("writes snapshots again")
	}
}

// removeLeftoversLocked removes every temporary directory that belongs to
// no open sink.
func (c *cleaningSnapshotStore) removeLeftoversLocked(why string) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			c.logger.Warn("cannot list the snapshot directory to remove temporary snapshots", "error", err)
		}
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasSuffix(e.Name(), snapshotTmpSuffix) && !c.open[e.Name()] {
			c.removeLocked(e.Name(), why)
		}
	}
}

func (c *cleaningSnapshotStore) removeLocked(name, why string) {
	path := filepath.Join(c.dir, name)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return
	}
	if err := os.RemoveAll(path); err != nil {
		c.logger.Warn("cannot remove a temporary snapshot directory", "path", path, "error", err)
		return
	}
	c.logger.Info("removed a temporary snapshot directory "+why, "path", path)
}

// cleaningSink reports its failures to the store and has it remove its
// temporary directory when it ends without a snapshot.
type cleaningSink struct {
	raft.SnapshotSink
	store *cleaningSnapshotStore
	once  sync.Once
}

func (s *cleaningSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	if err != nil {
		s.store.mu.Lock()
		s.store.recordLocked(err)
		s.store.mu.Unlock()
	}
	return n, err
}

// Close completes the snapshot; when that fails, the temporary directory
// is removed.
func (s *cleaningSink) Close() error {
	err := s.SnapshotSink.Close()
	s.once.Do(func() {
		if err != nil {
			s.store.mu.Lock()
			s.store.recordLocked(err)
			s.store.mu.Unlock()
		} else {
			s.store.recordDone()
		}
		s.store.finish(s.ID())
	})
	return err
}

// Cancel abandons the snapshot and removes its temporary directory, also
// when raft's Cancel could not flush it. A cancel is not itself a storage
// fault (an install can be refused or its stream cut); the write that
// failed before it was recorded by Write.
func (s *cleaningSink) Cancel() error {
	err := s.SnapshotSink.Cancel()
	s.once.Do(func() { s.store.finish(s.ID()) })
	return err
}
