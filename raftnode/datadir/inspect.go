package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/fsm"
)

// Server is one entry of a raft configuration.
type Server struct {
	ID       string
	RaftAddr string
	Voter    bool
}

// SnapshotInfo is one raft snapshot in a data dir.
type SnapshotInfo struct {
	ID    string `json:"id"`
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	Size  int64  `json:"size"`
}

// DataDirReport is what an offline look at a stopped member's data dir
// finds (coordd inspect).
type DataDirReport struct {
	Dir         string   `json:"dir"`
	Identity    Identity `json:"identity"`
	LogStore    string   `json:"log_store"` // bolt or wal
	CurrentTerm uint64   `json:"current_term"`
	FirstIndex  uint64   `json:"first_index"` // 0: the log is empty
	LastIndex   uint64   `json:"last_index"`  // of the log, or of the newest snapshot when the log is empty
	LastTerm    uint64   `json:"last_term"`
	// LogReach is the index up to which the member had stored entries
	// durably, by its LogReachFile (0: no record); the log (or the newest
	// snapshot) reaches at least this far, or the data dir is refused.
	LogReach  uint64         `json:"log_reach"`
	Snapshots []SnapshotInfo `json:"snapshots"` // newest first
	// Configuration is the latest configuration in the log, or the newest
	// snapshot's; ConfigurationIndex is where it was written.
	Configuration      []Server `json:"configuration"`
	ConfigurationIndex uint64   `json:"configuration_index"`
	// State is the state machine as this member would rebuild it: the newest
	// snapshot plus every command after it in the log (committed or not:
	// a stopped member cannot know which of its last entries committed).
	State *fsm.State `json:"-"`
}

// InspectDataDir reads a stopped member's data dir without changing it. It
// refuses a data dir another process holds (InUseError) and one whose
// storage is damaged, with the same checks a starting member runs.
func InspectDataDir(dir string) (*DataDirReport, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("data dir %s is not a directory", dir)
	}
	ident, ok, err := loadIdentity(dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("data dir %s has no %s: it is not a coordd member's data dir", dir, IdentityFile)
	}
	rep, err := checkStorage(dir, nil)
	if err != nil {
		return nil, err
	}
	if rep.dbMissing {
		return nil, &LostStateError{Dir: dir, Identity: ident, What: rep.dbLost}
	}
	if err := checkLogReach(dir, rep, rep.reachKept, nil); err != nil {
		return nil, err
	}
	kind, err := chooseLogStore(dir, "", rep)
	if err != nil {
		return nil, err
	}
	out := &DataDirReport{Dir: dir, Identity: ident, LogStore: kind}
	if rec, ok, err := loadLogReach(dir); err == nil && ok {
		out.LogReach = rec.Held
	}
	store, err := openReadOnly(dir)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogOrNull(nil))
	if err != nil {
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	// raft-wal cannot open a log without writing to it: read the segments
	// checkStorage already checked instead.
	var logs logReader = store
	if kind == LogStoreWAL {
		logs = rep.wal
		if rep.wal == nil {
			logs = &walLog{}
		}
	}
	err = Guard(dir, "reading the log", func() error { return inspectInto(out, store, logs, snaps) })
	return out, err
}

// logReader is what inspect reads a log through.
type logReader interface {
	FirstIndex() (uint64, error)
	LastIndex() (uint64, error)
	GetLog(index uint64, log *raft.Log) error
}

// openReadOnly opens raft.db read-only, waiting at most lockTimeout for a
// writer's lock.
func openReadOnly(dir string) (*raftboltdb.BoltStore, error) {
	var store *raftboltdb.BoltStore
	err := Guard(dir, "opening "+RaftDBFile, func() error {
		var oerr error
		store, oerr = raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(dir, RaftDBFile),
			BoltOptions: &bolt.Options{ReadOnly: true, Timeout: lockTimeout},
		})
		return oerr
	})
	if err != nil {
		return nil, openError(dir, err)
	}
	return store, nil
}

func inspectInto(out *DataDirReport, stable raft.StableStore, logs logReader, snaps *raft.FileSnapshotStore) error {
	var err error
	if out.CurrentTerm, err = stable.GetUint64(keyCurrentTerm); err != nil && err.Error() != "not found" {
		return fmt.Errorf("read current term: %w", err)
	}
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	st := fsm.New()
	var from uint64 // the first log index to replay
	for i, m := range metas {
		out.Snapshots = append(out.Snapshots, SnapshotInfo{ID: m.ID, Index: m.Index, Term: m.Term, Size: m.Size})
		if i == 0 {
			out.LastIndex, out.LastTerm = m.Index, m.Term
			out.Configuration, out.ConfigurationIndex = servers(m.Configuration), m.ConfigurationIndex
			_, rc, err := snaps.Open(m.ID)
			if err != nil {
				return fmt.Errorf("open snapshot %s: %w", m.ID, err)
			}
			st, err = fsm.ReadSnapshot(rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("read snapshot %s: %w", m.ID, err)
			}
			from = m.Index + 1
		}
	}
	if out.FirstIndex, err = logs.FirstIndex(); err != nil {
		return fmt.Errorf("read first index: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("read last index: %w", err)
	}
	from = max(from, out.FirstIndex)
	for idx := from; last > 0 && idx <= last; idx++ {
		var e raft.Log
		if err := logs.GetLog(idx, &e); err != nil {
			return fmt.Errorf("read log entry %d: %w", idx, err)
		}
		out.LastIndex, out.LastTerm = e.Index, e.Term
		switch e.Type {
		case raft.LogConfiguration:
			out.Configuration, out.ConfigurationIndex = servers(raft.DecodeConfiguration(e.Data)), e.Index
		case raft.LogCommand:
			next, _, err := st.Apply(e.Index, e.Data)
			if err != nil {
				return fmt.Errorf("apply log entry %d: %w", idx, err)
			}
			st = next
		}
	}
	out.State = st
	return nil
}

func servers(c raft.Configuration) []Server {
	var out []Server
	for _, s := range c.Servers {
		out = append(out, Server{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out
}

// errNotEmpty is wrapped by refusals of a data dir that already holds files.
var errNotEmpty = errors.New("data dir is not empty")
