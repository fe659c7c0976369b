package datadir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Bucket and key names raft-boltdb and raft use inside raft.db.
var (
	boltLogsBucket = []byte("logs")
	boltConfBucket = []byte("conf")
	keyCurrentTerm = []byte("CurrentTerm")
)

func setPanicOnFault() { debug.SetPanicOnFault(true) }

// checkStorage inspects a data dir before raft touches it, so that damage
// is refused with one clear line instead of a panic, a SIGBUS or a crash
// loop inside raft:
//   - raft.db is opened read-only with a lock timeout (another process
//     holding it is an InUseError), its size is compared with the pages its
//     meta page claims, and bolt's own consistency check runs over it;
//   - every snapshot is read back (raft checks its CRC) to find the newest
//     intact one, which is the one raft restores;
//   - the log must continue where that snapshot ends, because raft reads
//     every entry after the snapshot on start.
func checkStorage(dir string, logger hclog.Logger) (storageReport, error) {
	var rep storageReport
	if err := checkSnapshots(dir, logger, &rep); err != nil {
		return rep, err
	}
	path := filepath.Join(dir, RaftDBFile)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		rep.dbMissing, rep.dbLost = true, RaftDBFile+" is missing"
	case err != nil:
		return rep, fmt.Errorf("inspect %s: %w", path, err)
	case fi.Size() == 0:
		rep.dbMissing, rep.dbLost = true, RaftDBFile+" is empty"
	default:
		if err := Guard(dir, "checking "+RaftDBFile, func() error { return checkBolt(dir, path, fi.Size(), &rep) }); err != nil {
			return rep, err
		}
	}
	boltFirst, boltLast := rep.firstIndex, rep.lastIndex
	wal, err := checkWAL(dir, &rep)
	if err != nil {
		return rep, err
	}
	rep.wal = wal
	if wal != nil && boltLast > 0 {
		if rep.lastIndex > 0 {
			return rep, &DamagedError{Dir: dir, Reason: fmt.Sprintf("both %s (entries %d..%d) and %s/ (entries %d..%d) hold log entries",
				RaftDBFile, boltFirst, boltLast, WALDir, rep.firstIndex, rep.lastIndex)}
		}
		return rep, &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s holds log entries %d..%d beside a %s/ log store", RaftDBFile, boltFirst, boltLast, WALDir)}
	}
	if rep.logStore == LogStoreWAL && !rep.dbMissing && wal == nil && (rep.hasTerm || rep.snapshots > 0) {
		return rep, &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s records the %s log store but %s/ is missing", RaftDBFile, LogStoreWAL, WALDir)}
	}
	if rep.logStore == LogStoreBolt && wal != nil {
		return rep, &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s records the %s log store but a %s/ log store is beside it", RaftDBFile, LogStoreBolt, WALDir)}
	}
	// Raft reads every entry after the snapshot it restores (entries at or
	// below it may have gaps: raft leaves them after installing a snapshot).
	if rep.lastIndex > rep.usableSnap && rep.afterSnap != rep.lastIndex-rep.usableSnap {
		var reason string
		switch {
		case rep.firstIndex > rep.usableSnap+1 && rep.usableSnap == 0:
			reason = fmt.Sprintf("the log starts at index %d but no intact snapshot covers the entries before it", rep.firstIndex)
		case rep.firstIndex > rep.usableSnap+1:
			reason = fmt.Sprintf("the log starts at index %d but the newest intact snapshot ends at index %d (entries %d..%d are gone)",
				rep.firstIndex, rep.usableSnap, rep.usableSnap+1, rep.firstIndex-1)
		default:
			reason = fmt.Sprintf("%s: the log holds %d of the entries %d..%d after the newest intact snapshot (entries are missing)",
				RaftDBFile, rep.afterSnap, rep.usableSnap+1, rep.lastIndex)
		}
		return rep, &DamagedError{Dir: dir, Reason: reason}
	}
	return rep, nil
}

// checkBolt opens raft.db read-only and checks it. It runs under guard.
func checkBolt(dir, path string, size int64, rep *storageReport) error {
	damaged := func(format string, args ...any) error {
		return &DamagedError{Dir: dir, Reason: RaftDBFile + ": " + fmt.Sprintf(format, args...)}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return &InUseError{Dir: dir}
	}
	if err != nil {
		return damaged("%v", err)
	}
	defer db.Close()
	tx, err := db.Begin(false)
	if err != nil {
		return damaged("%v", err)
	}
	defer tx.Rollback()
	if tx.Size() > size {
		return damaged("the file is %d bytes but its pages reach %d bytes (truncated)", size, tx.Size())
	}
	// Walk every bucket and key here first: a corrupt page panics on this
	// goroutine (which guard recovers) rather than inside bolt's checker,
	// which runs on a goroutine of its own.
	if err := walkBolt(tx); err != nil {
		return damaged("%v", err)
	}
	var problems []string
	for err := range tx.Check() {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		more := ""
		if len(problems) > 1 {
			more = fmt.Sprintf(" (and %d more problems)", len(problems)-1)
		}
		return damaged("consistency check failed: %s%s", problems[0], more)
	}
	if b := tx.Bucket(boltConfBucket); b != nil {
		if v := b.Get(keyCurrentTerm); len(v) == 8 && binary.BigEndian.Uint64(v) > 0 {
			rep.hasTerm = true
		}
		rep.reachKept = b.Get(keyLogReach) != nil
		if v := b.Get(keyLogStore); v != nil {
			if !ValidLogStore(string(v)) {
				return damaged("unknown log store %q recorded", v)
			}
			rep.logStore = string(v)
		}
	}
	if b := tx.Bucket(boltLogsBucket); b != nil {
		first := true
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) != 8 {
				return damaged("log key of %d bytes", len(k))
			}
			idx := binary.BigEndian.Uint64(k)
			if first {
				rep.firstIndex, first = idx, false
			}
			rep.lastIndex = idx
			if idx > rep.usableSnap {
				rep.afterSnap++
			}
		}
	}
	return nil
}

// checkSnapshots finds the newest snapshot that reads back intact. Snapshot
// directories that exist but none of which is intact are damage.
func checkSnapshots(dir string, logger hclog.Logger, rep *storageReport) error {
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			rep.snapshots++
		}
	}
	if rep.snapshots == 0 {
		return nil
	}
	store, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogOrNull(logger).Named("snapshot-check"))
	if err != nil {
		return fmt.Errorf("open snapshot store: %w", err)
	}
	metas, err := store.List()
	if err != nil {
		return &DamagedError{Dir: dir, Reason: fmt.Sprintf("listing snapshots: %v", err)}
	}
	var failures []string
	for _, m := range metas {
		_, rc, err := store.Open(m.ID)
		if err == nil {
			err = rc.Close()
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", m.ID, err))
			continue
		}
		rep.usableSnap = m.Index
		break
	}
	if rep.usableSnap == 0 {
		reason := fmt.Sprintf("none of the %d snapshots in snapshots/ is intact", rep.snapshots)
		if len(failures) > 0 {
			reason += " (" + strings.Join(failures, "; ") + ")"
		} else {
			reason += " (no readable meta.json)"
		}
		return &DamagedError{Dir: dir, Reason: reason}
	}
	return nil
}

// walkBolt visits every bucket, key and value once.
func walkBolt(tx *bolt.Tx) error {
	var walk func(b *bolt.Bucket, depth int) error
	walk = func(b *bolt.Bucket, depth int) error {
		if depth > 16 {
			return errors.New("buckets nested too deep")
		}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if nb := b.Bucket(k); nb != nil {
					return walk(nb, depth+1)
				}
			}
			return nil
		})
	}
	return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b, 0) })
}
