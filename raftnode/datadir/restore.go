package datadir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// RestoreConfig says which member a restored data dir seeds.
type RestoreConfig struct {
	Dir      string // must be missing or empty
	ID       string
	RaftAddr string
	// Body is the state machine snapshot (already verified); Index and Term
	// are the raft position it was taken at.
	Body        io.Reader
	Index, Term uint64
	// LogStore is the log store the member will run on (DefaultLogStore when
	// empty); it is recorded in the data dir.
	LogStore string
	// IDFloor and TSOFloorMs, when set, are written as one
	// RaiseAllocatorFloors entry right after the snapshot (at Index+1,
	// Term): it is the first entry the restored member commits, so its
	// first ID reservation and TSO window start at or above them
	// (docs/operations.md#backup-and-restore). The snapshot itself stays
	// the backup's state byte for byte.
	IDFloor    uint64
	TSOFloorMs int64
	// NowMs stamps that entry (the restore's wall clock).
	NowMs int64
}

// RestoreDataDir seeds a new cluster's first member from a backup: a new
// identity with a new cluster ID, a raft snapshot holding Body at Index and
// Term whose configuration is this member alone, and a current term of Term
// (so that the new cluster's terms are newer than every term recorded in the
// state, which leader decisions are checked against). Started with `coordd
// serve`, the member elects itself; the others join it with --join. On
// failure nothing is left in Dir.
func RestoreDataDir(c RestoreConfig) (Identity, error) {
	if c.Index == 0 {
		return Identity{}, errors.New("the backup holds an empty state (index 0): bootstrap a new cluster instead of restoring it")
	}
	if err := CheckRestoreFloors(c.IDFloor, c.TSOFloorMs); err != nil {
		return Identity{}, err
	}
	_, statErr := os.Stat(c.Dir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return Identity{}, fmt.Errorf("create data dir: %w", err)
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return Identity{}, fmt.Errorf("read data dir: %w", err)
	}
	if len(entries) > 0 {
		return Identity{}, fmt.Errorf("%w: %s holds %s (restore seeds a new member: give it an empty --data-dir)", errNotEmpty, c.Dir, entries[0].Name())
	}
	ident, err := restoreInto(c)
	if err != nil {
		entries, _ := os.ReadDir(c.Dir)
		for _, e := range entries {
			os.RemoveAll(filepath.Join(c.Dir, e.Name()))
		}
		if created {
			os.Remove(c.Dir)
		}
		return Identity{}, err
	}
	return ident, nil
}

func restoreInto(c RestoreConfig) (Identity, error) {
	inc, err := newIncarnation()
	if err != nil {
		return Identity{}, err
	}
	clusterID, err := newIncarnation()
	if err != nil {
		return Identity{}, err
	}
	ident := Identity{Format: identityFormat, MemberID: c.ID, Incarnation: inc, ClusterID: clusterID}
	if err := saveIdentity(c.Dir, ident); err != nil {
		return Identity{}, err
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(c.Dir, RaftDBFile), BoltOptions: boltOptions()})
	if err != nil {
		return Identity{}, fmt.Errorf("create %s: %w", RaftDBFile, err)
	}
	defer store.Close()
	if err := store.SetUint64(keyCurrentTerm, c.Term); err != nil {
		return Identity{}, fmt.Errorf("record current term: %w", err)
	}
	kind := c.LogStore
	if kind == "" {
		kind = DefaultLogStore
	}
	if !ValidLogStore(kind) {
		return Identity{}, fmt.Errorf("unknown log store %q (want %s or %s)", kind, LogStoreBolt, LogStoreWAL)
	}
	if err := recordLogStore(store, kind); err != nil {
		return Identity{}, err
	}
	var logs raft.LogStore = store
	if kind == LogStoreWAL {
		// The raft-wal log (empty, or holding just the floors entry
		// below), so the data dir is whole as recorded.
		w, err := openWAL(c.Dir, 0, nil)
		if err != nil {
			return Identity{}, err
		}
		defer w.Close()
		logs = w
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(c.Dir, 2, hclogOrNull(nil))
	if err != nil {
		return Identity{}, fmt.Errorf("open snapshot store: %w", err)
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(c.RaftAddr))
	defer trans.Close()
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(c.ID), Address: raft.ServerAddress(c.RaftAddr)}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, c.Index, c.Term, conf, c.Index, trans)
	if err != nil {
		return Identity{}, fmt.Errorf("create snapshot: %w", err)
	}
	if _, err := io.Copy(sink, c.Body); err != nil {
		_ = sink.Cancel()
		return Identity{}, fmt.Errorf("write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return Identity{}, fmt.Errorf("finish snapshot: %w", err)
	}
	if err := writeAllocatorFloors(logs, c); err != nil {
		return Identity{}, err
	}
	return ident, syncDir(c.Dir)
}
