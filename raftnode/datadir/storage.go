package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// RaftDBFile is the bolt file holding a member's raft log and stable store.
const RaftDBFile = "raft.db"

// lockTimeout bounds the wait for another process's lock on raft.db.
const lockTimeout = time.Second

// replaceHint is the recovery procedure every refusal names.
const replaceHint = "replace this member: remove it from the cluster (coordctl cluster remove ID), move this data dir aside, " +
	"and start the member again with an empty data dir and --join (docs/operations.md#replacing-a-member)"

// DamagedError refuses a data dir whose storage cannot be trusted.
type DamagedError struct {
	Dir    string
	Reason string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("data dir %s is damaged: %s; %s", e.Dir, e.Reason, replaceHint)
}

// LostStateError refuses a data dir that belongs to a cluster member but
// has lost its raft state: starting it would forget the member's term and
// vote (or bootstrap a second time).
type LostStateError struct {
	Dir      string
	Identity Identity
	What     string
}

func (e *LostStateError) Error() string {
	return fmt.Sprintf("data dir %s has lost its raft state (%s) but %s says it is member %s of cluster %s; "+
		"it must not rejoin with its term and vote forgotten: %s",
		e.Dir, e.What, IdentityFile, e.Identity.MemberID, ClusterOrNone(e.Identity.ClusterID), replaceHint)
}

// ClusterOrNone is a cluster ID for a message: "(not yet formed)" when empty.
func ClusterOrNone(s string) string {
	if s == "" {
		return "(not yet formed)"
	}
	return s
}

// InUseError refuses a data dir locked by another process.
type InUseError struct{ Dir string }

func (e *InUseError) Error() string {
	return fmt.Sprintf("data dir %s is in use by another process (%s is locked); stop that process or give this one another --data-dir",
		e.Dir, RaftDBFile)
}

// WrongMemberError refuses a data dir created for another member ID.
type WrongMemberError struct {
	Dir       string
	Recorded  string
	Requested string
}

func (e *WrongMemberError) Error() string {
	return fmt.Sprintf("data dir %s belongs to member %s (%s), not --id %s: start it with --id %s, or give member %s its own data dir",
		e.Dir, e.Recorded, filepath.Join(e.Dir, IdentityFile), e.Requested, e.Recorded, e.Requested)
}

// Storage is a member's opened, checked durable state: the identity record,
// the bolt log and stable store (locked against other processes) and the
// snapshot store. OpenStorage binds no port, so a member can refuse a bad
// data dir before it listens anywhere.
type Storage struct {
	dir   string
	ident *identityStore
	// store is raft.db: the stable store always, and the log store too when
	// kind is LogStoreBolt.
	store *raftboltdb.BoltStore
	// logs is where the entries live (store, or wal) behind the writer of
	// LogReachFile.
	logs  raft.LogStore
	reach *reachFile
	wal   *raftwal.WAL
	kind  string
	// stable is store as raft's StableStore: it records every durable
	// term and vote in VoteFile too.
	stable *recordingStable
	snaps  *SnapshotCache
}

// LogStore is the log store the data dir uses (LogStoreBolt or LogStoreWAL).
func (s *Storage) LogStore() string { return s.kind }

// Close releases the stores (and the lock on raft.db, released last).
func (s *Storage) Close() error {
	if s == nil || s.store == nil {
		return nil
	}
	var err error
	if s.wal != nil {
		err = s.wal.Close()
		s.wal = nil
	}
	if s.reach != nil {
		err = errors.Join(err, s.reach.close())
		s.reach = nil
	}
	err = errors.Join(err, s.store.Close())
	s.store, s.logs = nil, nil
	return err
}

// Options says which member's data dir Open opens, and how.
type Options struct {
	// ID is the member the data dir belongs to (recorded on a new one).
	ID string
	// Dir is the data dir; Open creates it when it is missing.
	Dir string
	// LogStore is the log store for a new data dir (LogStoreBolt or
	// LogStoreWAL; empty: DefaultLogStore). A data dir that records one
	// keeps it, and a different non-empty request is refused.
	LogStore string
	// WALSegmentSize is raft-wal's segment size in bytes (0: raft-wal's
	// default).
	WALSegmentSize int
	// BoltOptions, when set, adjusts how raft.db is opened (tests).
	BoltOptions func(*bolt.Options)
	// Logger receives the checks' findings (nil: none).
	Logger hclog.Logger
	// TestOnlySkipIdentityCheck opens a data dir whatever its identity and
	// raft state say (tests that copy data dirs between members).
	TestOnlySkipIdentityCheck bool
}

// Open checks and opens o.Dir: it refuses a data dir locked by another
// process, one created for another member ID, one whose raft state was
// lost, and one whose storage is damaged (see checkStorage). On a new data
// dir it writes the identity record first.
func Open(o Options) (st *Storage, err error) {
	cfg := o
	cfg.Logger = hclogOrNull(o.Logger)
	if cfg.ID == "" || cfg.Dir == "" {
		return nil, errors.New("datadir: ID and Dir are required")
	}
	dir := cfg.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	ident, hasIdent, err := loadIdentity(dir)
	if err != nil {
		return nil, err
	}
	if hasIdent && ident.MemberID != cfg.ID && !cfg.TestOnlySkipIdentityCheck {
		return nil, &WrongMemberError{Dir: dir, Recorded: ident.MemberID, Requested: cfg.ID}
	}
	rep, err := checkStorage(dir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	skip := cfg.TestOnlySkipIdentityCheck
	switch {
	case skip && hasIdent:
		cfg.Logger.Warn("TEST ONLY: not checking that this data dir kept its raft state")
	case hasIdent && rep.dbMissing && rep.dbLost != "":
		return nil, &LostStateError{Dir: dir, Identity: ident, What: rep.dbLost}
	case hasIdent && ident.ClusterID != "" && !rep.hasTerm && rep.snapshots > 0:
		return nil, &LostStateError{Dir: dir, Identity: ident, What: RaftDBFile + " has snapshots beside it but no current term or vote"}
	case !hasIdent && rep.hasState() && !skip:
		return nil, &DamagedError{Dir: dir, Reason: fmt.Sprintf("it holds raft state but no %s (written by an older coordd, or the file was lost)", IdentityFile)}
	case !hasIdent:
		inc, err := newIncarnation()
		if err != nil {
			return nil, err
		}
		ident = Identity{Format: identityFormat, MemberID: cfg.ID, Incarnation: inc}
		if err := saveIdentity(dir, ident); err != nil {
			return nil, err
		}
	}
	if !skip {
		if err := checkLogReach(dir, rep, rep.reachKept, cfg.Logger); err != nil {
			return nil, err
		}
	}
	kind, err := chooseLogStore(dir, cfg.LogStore, rep)
	if err != nil {
		return nil, err
	}
	st = &Storage{dir: dir, ident: &identityStore{dir: dir, id: ident}, kind: kind}
	if err := Guard(dir, "opening "+RaftDBFile, func() error {
		var oerr error
		opts := boltOptions()
		if cfg.BoltOptions != nil {
			cfg.BoltOptions(opts)
		}
		st.store, oerr = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, RaftDBFile), BoltOptions: opts})
		return oerr
	}); err != nil {
		return nil, openError(dir, err)
	}
	st.logs = st.store
	if err := recordLogStore(st.store, kind); err != nil {
		st.Close()
		return nil, err
	}
	where := RaftDBFile
	if kind == LogStoreWAL {
		where = WALDir + "/"
		if err := Guard(dir, "opening "+where, func() error {
			var werr error
			st.wal, werr = openWAL(dir, cfg.WALSegmentSize, cfg.Logger)
			return werr
		}); err != nil {
			st.Close()
			return nil, err
		}
		st.logs = st.wal
	}
	if err := Guard(dir, "reading the log in "+where, func() error { return checkEntries(dir, where, st.logs, st.store, rep) }); err != nil {
		st.Close()
		return nil, err
	}
	if err := keepLogReach(st, rep.reachKept); err != nil {
		st.Close()
		return nil, err
	}
	if err := Guard(dir, "reading the term and vote in "+RaftDBFile, func() error {
		var verr error
		st.stable, verr = checkVote(dir, st.store, skip)
		return verr
	}); err != nil {
		st.Close()
		return nil, err
	}
	files, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, cfg.Logger.Named("snapshot"))
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	st.snaps = newSnapshotCache(newCleaningSnapshotStore(files, dir, cfg.Logger.Named("snapshot")))
	return st, nil
}

// boltOptions is how raft.db is opened for writing. bbolt's freelist is
// not written on commit (NoFreelistSync: each commit writes fewer pages;
// it is rebuilt by scanning the file on open, which for raft.db — the
// trailing log, or just the stable store with --raft-log-store wal — is
// small) and kept as a hashmap. Measured at store level
// (BenchmarkStoreLogs, bench/RESULTS.md): appends 4–20 % faster and p50
// 15–25 % lower than the defaults in every interleaved run. Data dirs stay
// compatible both ways: a file written so opens with any bbolt (without
// the option it writes a freelist on open), and one written with a
// freelist opens with it.
func boltOptions() *bolt.Options {
	return &bolt.Options{Timeout: lockTimeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType}
}

// checkEntries decodes every log entry and the stable-store values raft
// reads on start: bolt has no checksums on values, so a flipped byte in an
// entry would otherwise surface later as a panic inside raft.
func checkEntries(dir, where string, logs raft.LogStore, stable raft.StableStore, rep storageReport) error {
	// raft reads the entry at the store's own last index first, and fails
	// to start when it cannot (raft-wal reports the index before an empty
	// tail segment as its last, whether or not it still holds it).
	if last, err := logs.LastIndex(); err != nil {
		return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s: the last index cannot be read: %v", where, err)}
	} else if last > 0 {
		var e raft.Log
		if err := logs.GetLog(last, &e); err != nil {
			return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s: the log store says its last entry is %d but cannot read it: %v", where, last, err)}
		}
	}
	// Only what raft reads on start: the entries after the snapshot it
	// restores (checkStorage made sure they are all there).
	for idx := max(rep.firstIndex, rep.usableSnap+1); rep.lastIndex > 0 && idx <= rep.lastIndex; idx++ {
		var e raft.Log
		if err := logs.GetLog(idx, &e); err != nil {
			return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s: log entry %d cannot be read: %v", where, idx, err)}
		}
		if e.Index != idx {
			return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s: the entry stored at index %d says it is entry %d", where, idx, e.Index)}
		}
	}
	for _, k := range [][]byte{keyCurrentTerm, []byte("LastVoteTerm")} {
		if _, err := stable.GetUint64(k); err != nil && err.Error() != "not found" {
			return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s: %s cannot be read: %v", RaftDBFile, k, err)}
		}
	}
	return nil
}

// openError classifies an error from opening raft.db.
func openError(dir string, err error) error {
	var de *DamagedError
	switch {
	case errors.As(err, &de):
		return err
	case errors.Is(err, bolterrors.ErrTimeout):
		return &InUseError{Dir: dir}
	case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrVersionMismatch), errors.Is(err, bolterrors.ErrChecksum):
		return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s: %v", RaftDBFile, err)}
	}
	return fmt.Errorf("open raft log store: %w", err)
}

// Guard runs f, turning a panic (and, through SetPanicOnFault, a SIGBUS on
// a truncated memory-mapped file) into a DamagedError.
func Guard(dir, what string, f func() error) (err error) {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s failed: %v", what, r)}
			}
		}()
		setPanicOnFault()
		done <- f()
	}()
	return <-done
}

// storageReport is what checkStorage learned about a data dir.
type storageReport struct {
	dbMissing  bool   // raft.db absent or empty
	dbLost     string // why raft.db counts as lost, when dbMissing
	hasTerm    bool   // the stable store records a current term
	firstIndex uint64 // first log index (0: empty log)
	lastIndex  uint64
	afterSnap  uint64 // log entries above usableSnap
	snapshots  int    // snapshot directories present
	usableSnap uint64 // index of the newest snapshot that reads back intact (0: none)
	logStore   string // the log store raft.db records ("": none recorded)
	walPresent bool   // a wal/ directory exists
	reachKept  bool   // raft.db says the data dir keeps LogReachFile
	wal        *walLog
}

func (r storageReport) hasState() bool { return r.hasTerm || r.lastIndex > 0 || r.snapshots > 0 }

// hclogOrNull avoids nil loggers in helpers called before defaults apply.
func hclogOrNull(l hclog.Logger) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	return l
}
