package raftnode_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// wantDamaged opens dir with cfg and wants a DamagedError in one line,
// "data dir DIR is damaged: ..." containing want and the recovery
// procedure, with inspect refusing it too and nothing in the data dir
// changed.
func wantDamaged(t *testing.T, dir string, cfg raftnode.Config, want string) {
	t.Helper()
	before := listing(t, dir)
	n, err := raftnode.Open(cfg)
	if err == nil {
		n.Shutdown()
		t.Fatal("Open accepted the damaged data dir")
	}
	var de *datadir.DamagedError
	if !errors.As(err, &de) {
		t.Fatalf("Open error is %T (%v), want a DamagedError", err, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, want) || !strings.Contains(msg, "docs/operations.md#replacing-a-member") || strings.Contains(msg, "\n") ||
		!strings.HasPrefix(msg, "data dir "+dir+" is damaged: ") {
		t.Fatalf("message %q: want one line \"data dir %s is damaged: ...\" containing %q and the recovery procedure", msg, dir, want)
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("refusal changed the data dir:\nbefore %s\nafter  %s", before, after)
	}
	if _, err := datadir.InspectDataDir(dir); !errors.As(err, &de) {
		t.Fatalf("inspect of the damaged data dir: %v, want a DamagedError", err)
	}
}

// zeroFrom writes zeros over path from off to its end, as a lost tail of
// a preallocated segment reads.
func zeroFrom(t *testing.T, path string, off int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, fi.Size()-off), off); err != nil {
		t.Fatal(err)
	}
}

// TestShortWALIsRefused: the shapes of a lost raft-wal tail that the
// segment checks alone take for a clean, shorter log (probe D14) are
// refused against the member's LogReachFile; the one batch that may be
// torn is not.
func TestShortWALIsRefused(t *testing.T) {
	seed := seededWALDataDir(t)
	wal := func(d string) string { return filepath.Join(d, datadir.WALDir) }
	t.Run("wal/ emptied, directory kept", func(t *testing.T) {
		dir := copyDir(t, seed)
		ms, _ := filepath.Glob(filepath.Join(wal(dir), "*"))
		for _, m := range ms {
			os.Remove(m)
		}
		wantDamaged(t, dir, walOpenCfg(dir), "are gone")
	})
	t.Run("zeros over the tail segment's entries", func(t *testing.T) {
		dir := copyDir(t, seed)
		s := segmentFiles(t, dir)
		tail := s[len(s)-1]
		es := frames(t, tail, 1)
		zeroFrom(t, tail, es[0])
		wantDamaged(t, dir, walOpenCfg(dir), "are gone")
	})
	t.Run("zeros from the middle of the tail segment", func(t *testing.T) {
		dir := copyDir(t, seed)
		s := segmentFiles(t, dir)
		tail := s[len(s)-1]
		es := frames(t, tail, 1)
		zeroFrom(t, tail, es[len(es)/2])
		wantDamaged(t, dir, walOpenCfg(dir), "are gone")
	})
	t.Run("tail segment deleted", func(t *testing.T) {
		dir := copyDir(t, seed)
		s := segmentFiles(t, dir)
		os.Remove(s[len(s)-1])
		wantDamaged(t, dir, walOpenCfg(dir), "are gone")
	})
	t.Run("log-reach deleted", func(t *testing.T) {
		dir := copyDir(t, seed)
		os.Remove(filepath.Join(dir, datadir.LogReachFile))
		wantDamaged(t, dir, walOpenCfg(dir), datadir.LogReachFile+" is missing")
	})
	t.Run("log-reach: both slots damaged", func(t *testing.T) {
		dir := copyDir(t, seed)
		p := filepath.Join(dir, datadir.LogReachFile)
		flipBytes(t, p, 12, 1)
		flipBytes(t, p, 64+12, 1)
		wantDamaged(t, dir, walOpenCfg(dir), "no intact record")
	})
	t.Run("only the last batch zeroed: torn, accepted", func(t *testing.T) {
		dir := copyDir(t, seed)
		before, err := datadir.InspectDataDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		s := segmentFiles(t, dir)
		tail := s[len(s)-1]
		es := frames(t, tail, 1)
		zeroFrom(t, tail, es[len(es)-1])
		n, err := raftnode.Open(walOpenCfg(dir))
		if err != nil {
			t.Fatalf("Open with the last (unacknowledged) batch gone: %v", err)
		}
		if got := n.Raft().LastIndex(); got != before.LastIndex-1 {
			t.Errorf("last index %d, want %d", got, before.LastIndex-1)
		}
		n.Shutdown()
	})
	t.Run("one slot torn: the other is used", func(t *testing.T) {
		dir := copyDir(t, seed)
		p := filepath.Join(dir, datadir.LogReachFile)
		flipBytes(t, p, 12, 1) // one of the two slots
		n, err := raftnode.Open(walOpenCfg(dir))
		if err != nil {
			t.Fatalf("Open with one torn slot of %s: %v", datadir.LogReachFile, err)
		}
		n.Shutdown()
	})
}

// TestShortBoltLogIsRefused: raft.db whose newest log entries are gone (as
// a rolled-back bolt meta page reads) is refused like a short raft-wal log.
func TestShortBoltLogIsRefused(t *testing.T) {
	dir := seededDataDir(t)
	db, err := bolt.Open(filepath.Join(dir, datadir.RaftDBFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("logs")).Cursor()
		k, _ := c.Last()
		last := binary.BigEndian.Uint64(k)
		for i := 0; i < 3; i++ {
			var key [8]byte
			binary.BigEndian.PutUint64(key[:], last-uint64(i))
			if err := tx.Bucket([]byte("logs")).Delete(key[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	wantDamaged(t, dir, openCfg(dir), "are gone")
}

// TestTailDeletionLowersTheReach: raft's deletion of a conflicting suffix
// shortens the log legitimately; the record is lowered first, so the data
// dir opens afterwards (a record left high would refuse it).
func TestTailDeletionLowersTheReach(t *testing.T) {
	for _, store := range []string{datadir.LogStoreBolt, datadir.LogStoreWAL} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			cfg := openCfg(dir)
			cfg.LogStore, cfg.WALSegmentSize = store, walSegmentSize
			st, err := raftnode.OpenStorage(cfg)
			if err != nil {
				t.Fatal(err)
			}
			logs := st.Logs()
			// Two batches: the record holds 1..5 for sure, and raft then
			// deletes a suffix reaching below that.
			if err := logs.StoreLogs(testEntries(1, 5, 1)); err != nil {
				t.Fatal(err)
			}
			if err := logs.StoreLogs(testEntries(6, 10, 1)); err != nil {
				t.Fatal(err)
			}
			if err := logs.DeleteRange(3, 10); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			st, err = raftnode.OpenStorage(cfg)
			if err != nil {
				t.Fatalf("reopen after a suffix deletion: %v", err)
			}
			logs = st.Logs()
			if last, _ := logs.LastIndex(); last != 2 {
				t.Fatalf("last index %d, want 2", last)
			}
			// Appending again raises it: two batches, so the record holds
			// entries up to 10 for sure.
			if err := logs.StoreLogs(testEntries(3, 10, 2)); err != nil {
				t.Fatal(err)
			}
			if err := logs.StoreLogs(testEntries(11, 20, 2)); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			dropEntriesFrom(t, dir, store, 8)
			wantDamaged(t, dir, cfg, "are gone")
		})
	}
}

// testEntries are log entries first..last of one term.
func testEntries(first, last, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := first; i <= last; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry-%d", i))})
	}
	return out
}

// dropEntriesFrom loses a stopped member's log from index from on: bolt's
// keys are deleted, raft-wal's directory is emptied (which loses more).
func dropEntriesFrom(t *testing.T, dir, store string, from uint64) {
	t.Helper()
	if store == datadir.LogStoreWAL {
		ms, _ := filepath.Glob(filepath.Join(dir, datadir.WALDir, "*"))
		for _, m := range ms {
			if err := os.Remove(m); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	db, err := bolt.Open(filepath.Join(dir, datadir.RaftDBFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		c := b.Cursor()
		var key [8]byte
		binary.BigEndian.PutUint64(key[:], from)
		for k, _ := c.Seek(key[:]); k != nil; k, _ = c.Seek(key[:]) {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
