package raftnode_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/testutil"
)

// seededDataDir returns a stopped single member's data dir holding two
// snapshots and a log that starts after the older one (the member keeps the
// log back to its older snapshot, whatever the trailing logs).
func seededDataDir(t *testing.T) string {
	t.Helper()
	// Only the two snapshots taken here: a timed one in between would
	// leave the log covering the older snapshot.
	c := newCluster(t, 1, withConfig(func(i int, cfg *raftnode.Config) {
		smallSnapshots(i, cfg)
		cfg.SnapshotInterval = time.Hour
	}))
	n := c.node(c.waitLeader())
	writeEntries(t, n, "a", 120)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n, "b", 120)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n, "c", 5)
	dir := c.cfgs[0].DataDir
	c.stop(0)
	return dir
}

// copyDir copies a data dir so each case damages its own copy.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatalf("copy data dir: %v", err)
	}
	return dst
}

func snapshotDirs(t *testing.T, dir string) []string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*"))
	sort.Strings(ms) // names start with term-index: oldest first here
	if len(ms) < 2 {
		t.Fatalf("precondition: want 2 snapshots, have %v", ms)
	}
	return ms
}

func flipBytes(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] ^= 0xff
	}
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
}

// openCfg opens a data dir on bolt: the damage these tests do is to the log in raft.db.
func openCfg(dir string) raftnode.Config {
	_, tr := raft.NewInmemTransport("inmem-n0")
	return raftnode.Config{ID: "n0", DataDir: dir, RaftAddr: "inmem-n0", Transport: tr, LogStore: datadir.LogStoreBolt}
}

// TestDamagedStorageIsRefused damages a copy of a real data dir in each way
// a disk or an operator can, and checks that opening it gives one clear,
// typed refusal (no panic, no SIGBUS, no silent start).
func TestDamagedStorageIsRefused(t *testing.T) {
	seed := seededDataDir(t)
	db := func(dir string) string { return filepath.Join(dir, datadir.RaftDBFile) }
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		lost   bool   // a LostStateError rather than a DamagedError
		want   string // in the message
	}{
		{"raft.db emptied", func(t *testing.T, d string) { os.Truncate(db(d), 0) }, true, "raft.db is empty"},
		{"raft.db deleted", func(t *testing.T, d string) { os.Remove(db(d)) }, true, "raft.db is missing"},
		{"raft.db truncated to 3 pages", func(t *testing.T, d string) { os.Truncate(db(d), 3*4096) }, false, "truncated"},
		{"raft.db truncated to 1 page", func(t *testing.T, d string) { os.Truncate(db(d), 4096) }, false, "file size too small"},
		{"raft.db pages bit-flipped", func(t *testing.T, d string) {
			fi, _ := os.Stat(db(d))
			for p := int64(2); p < fi.Size()/4096; p++ {
				flipBytes(t, db(d), p*4096+16, 64)
			}
		}, false, "raft.db"},
		{"raft.db meta pages bit-flipped", func(t *testing.T, d string) {
			flipBytes(t, db(d), 20, 32)
			flipBytes(t, db(d), 4096+20, 32)
		}, false, "raft.db"},
		{"snapshots deleted", func(t *testing.T, d string) { os.RemoveAll(filepath.Join(d, "snapshots")) }, false,
			"no intact snapshot covers"},
		{"snapshot metadata garbled", func(t *testing.T, d string) {
			for _, s := range snapshotDirs(t, d) {
				os.WriteFile(filepath.Join(s, "meta.json"), []byte("garbage"), 0o600)
			}
		}, false, "no readable meta.json"},
		{"newest snapshot bit-flipped, log compacted past the older", func(t *testing.T, d string) {
			// As a member compacted it before it kept the log back to its
			// older snapshot.
			first, _, snap := logBounds(t, d)
			var below []uint64
			for i := first; i < snap; i++ {
				below = append(below, i)
			}
			deleteLogEntries(t, d, below...)
			s := snapshotDirs(t, d)
			flipBytes(t, filepath.Join(s[len(s)-1], "state.bin"), 10, 1)
		}, false, "the newest intact snapshot ends at index"},
		{"every snapshot bit-flipped", func(t *testing.T, d string) {
			for _, s := range snapshotDirs(t, d) {
				flipBytes(t, filepath.Join(s, "state.bin"), 10, 1)
			}
		}, false, "CRC mismatch"},
		{"log entry above the newest snapshot deleted", func(t *testing.T, d string) {
			// A hole the snapshot does not cover: raft would read through it.
			_, last, snap := logBounds(t, d)
			if last < snap+3 {
				t.Fatalf("precondition: log ends at %d, newest snapshot at %d", last, snap)
			}
			deleteLogEntries(t, d, last-2)
		}, false, "entries are missing"},
		{"identity record garbled", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, datadir.IdentityFile), []byte("{not json"), 0o600)
		}, false, "identity.json is not valid"},
		{"identity record lost beside raft state", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, datadir.IdentityFile))
		}, false, "no identity.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, seed)
			tc.damage(t, dir)
			before := listing(t, dir)
			n, err := raftnode.Open(openCfg(dir))
			if err == nil {
				n.Shutdown()
				t.Fatal("Open accepted the damaged data dir")
			}
			var de *datadir.DamagedError
			var le *datadir.LostStateError
			if tc.lost && !errors.As(err, &le) || !tc.lost && !errors.As(err, &de) {
				t.Fatalf("Open error is %T (%v), want a %s", err, err, map[bool]string{true: "LostStateError", false: "DamagedError"}[tc.lost])
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "docs/operations.md") || strings.Contains(msg, "\n") {
				t.Fatalf("message %q: want one line containing %q and the recovery procedure", msg, tc.want)
			}
			if tc.lost == false && !strings.HasPrefix(msg, "data dir "+dir+" is damaged: ") {
				t.Fatalf("message %q: want it to start with \"data dir %s is damaged: \"", msg, dir)
			}
			if after := listing(t, dir); after != before {
				t.Fatalf("refusal changed the data dir:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	t.Run("undamaged copy opens", func(t *testing.T) {
		n, err := raftnode.Open(openCfg(copyDir(t, seed)))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		n.Shutdown()
	})
	t.Run("log hole below the newest snapshot opens", func(t *testing.T) {
		// What a follower's log looks like after installing a snapshot:
		// entries before it, a hole, the entries after it.
		dir := copyDir(t, seed)
		first, _, snap := logBounds(t, dir)
		if first+4 >= snap {
			t.Fatalf("precondition: log starts at %d, newest snapshot at %d", first, snap)
		}
		deleteLogEntries(t, dir, first+2, first+3, snap-1, snap)
		n, err := raftnode.Open(openCfg(dir))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		n.Shutdown()
	})
	t.Run("newest snapshot bit-flipped, log still covers the older", func(t *testing.T) {
		// Default settings keep more trailing logs than the threshold, so
		// raft falls back to the older snapshot; nothing is refused.
		checkSnapshotFallback(t, func(_ int, cfg *raftnode.Config) {
			cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 400, 100*time.Millisecond
		}, openCfg)
	})
}

// checkSnapshotFallback writes two snapshots on a one-member cluster
// configured by configure, bit-flips the newest, and requires the member
// to open again (with open's config) from the older one and its log.
func checkSnapshotFallback(t *testing.T, configure func(int, *raftnode.Config), open func(dir string) raftnode.Config) {
	t.Helper()
	c := newCluster(t, 1, withConfig(configure))
	n := c.node(c.waitLeader())
	writeEntries(t, n, "a", 80)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n, "b", 80)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	dir := c.cfgs[0].DataDir
	c.stop(0)
	s := snapshotDirs(t, dir)
	flipBytes(t, filepath.Join(s[len(s)-1], "state.bin"), 10, 1)
	n2, err := raftnode.Open(open(dir))
	if err != nil {
		t.Fatalf("Open with an older intact snapshot and a covering log: %v", err)
	}
	n2.Shutdown()
}

// logBounds returns the first and last index in a stopped member's log and
// the index of its newest snapshot (from the snapshot directory names,
// term-index-time).
func logBounds(t *testing.T, dir string) (first, last, snap uint64) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, datadir.RaftDBFile), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("logs")).Cursor()
		k, _ := c.First()
		first = binary.BigEndian.Uint64(k)
		k, _ = c.Last()
		last = binary.BigEndian.Uint64(k)
		return nil
	})
	for _, s := range snapshotDirs(t, dir) {
		var term, idx, ts uint64
		if _, err := fmt.Sscanf(filepath.Base(s), "%d-%d-%d", &term, &idx, &ts); err == nil && idx > snap {
			snap = idx
		}
	}
	return first, last, snap
}

// deleteLogEntries removes the given indexes from a stopped member's log.
func deleteLogEntries(t *testing.T, dir string, idxs ...uint64) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, datadir.RaftDBFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		for _, i := range idxs {
			k := binary.BigEndian.AppendUint64(nil, i)
			if b.Get(k) == nil {
				return fmt.Errorf("no log entry %d", i)
			}
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

// listing names every file with its size, to prove a refusal wrote nothing.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var parts []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			rel, _ := filepath.Rel(dir, p)
			parts = append(parts, fmt.Sprintf("%s:%d:%d", rel, fi.Size(), fi.ModTime().UnixNano()))
		}
		return nil
	})
	return strings.Join(parts, " ")
}

// TestLogGapBelowSnapshotIsAccepted: a follower that installed a snapshot
// keeps some entries from before it, then a gap, then the entries after
// it. Raft never reads below the snapshot, so the member must restart.
func TestLogGapBelowSnapshotIsAccepted(t *testing.T) {
	c := newCluster(t, 3, withConfig(smallSnapshots))
	l := c.waitLeader()
	f := (l + 1) % 3
	writeEntries(t, c.node(l), "before", 20)
	// The follower comes back keeping its whole log (as with the default
	// trailing logs), so the install cannot compact its older entries away.
	c.stop(f)
	c.cfgs[f].SnapshotThreshold, c.cfgs[f].TrailingLogs = 4096, 4096
	// Two members left: on a loaded machine leadership may move between
	// them, so these writes go to whichever leads.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(time.Minute))
	defer cancel()
	for j := 0; j < 300; j++ {
		if _, _, err := c.proposeRetry(ctx, &logpb.ReserveIDs{Count: 1}, fmt.Sprintf("while-lagging-%d", j), f); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.node(c.waitLeader(f)).Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.open(f)
	c.waitConverged(0, 1, 2)
	writeEntries(t, c.node(c.waitLeader()), "after", 10)
	c.waitConverged(0, 1, 2)
	first, err := c.node(f).FirstLogIndex()
	snap, _, ok := c.node(f).LastSnapshot()
	if err != nil || !ok || first >= snap {
		t.Fatalf("precondition: follower log starts at %d (%v), snapshot at %d (%v): want entries left below the snapshot", first, err, snap, ok)
	}
	c.stop(f)
	cfg := c.cfgs[f]
	_, cfg.Transport = raft.NewInmemTransport(raft.ServerAddress(cfg.RaftAddr))
	n, err := raftnode.Open(cfg)
	if err != nil && strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a member that installed a snapshot is refused: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	n.Shutdown()
}
