package raftnode_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// walSegmentSize keeps test segments small, so a few hundred entries span
// several sealed segments and a tail.
const walSegmentSize = 2 << 10

func useWAL(_ int, cfg *raftnode.Config) {
	cfg.LogStore, cfg.WALSegmentSize = datadir.LogStoreWAL, walSegmentSize
}

// seededWALDataDir is seededDataDir on the raft-wal log store.
func seededWALDataDir(t *testing.T) string {
	t.Helper()
	dir, _ := seededWALDataDirState(t)
	return dir
}

// seededWALDataDirState also returns the member's state when it stopped.
func seededWALDataDirState(t *testing.T) (string, []byte) {
	t.Helper()
	c := newCluster(t, 1, withConfig(func(i int, cfg *raftnode.Config) {
		smallSnapshots(i, cfg)
		useWAL(i, cfg)
		cfg.SnapshotInterval = time.Hour
	}))
	n := c.node(c.waitLeader())
	if err := n.SetClusterID("wal-test-cluster"); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n, "a", 120)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n, "b", 120)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n, "c", 40)
	st := snapshotBytes(t, n.State())
	dir := c.cfgs[0].DataDir
	c.stop(0)
	return dir, st
}

func walOpenCfg(dir string) raftnode.Config {
	cfg := openCfg(dir)
	cfg.LogStore, cfg.WALSegmentSize = datadir.LogStoreWAL, walSegmentSize
	return cfg
}

// segmentFiles returns the data dir's segment files, oldest first.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(dir, datadir.WALDir, "*.wal"))
	sort.Strings(ms)
	if len(ms) < 2 {
		t.Fatalf("precondition: want a sealed segment and a tail, have %v", ms)
	}
	return ms
}

// frames lists the offsets of one kind of frame (1 entry, 3 commit) in a
// segment file, in order, up to the zeros after the last write.
func frames(t *testing.T, path string, typ byte) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for off := 32; off+8 <= len(b) && b[off] != 0; {
		n := 0
		if b[off] != 3 {
			n = int(binary.LittleEndian.Uint32(b[off+4:]))
			n += (8 - n%8) % 8
		}
		if b[off] == typ {
			out = append(out, int64(off))
		}
		off += 8 + n
	}
	if len(out) < 2 {
		t.Fatalf("precondition: %s has %d frames of type %d", path, len(out), typ)
	}
	return out
}

func setByte(t *testing.T, path string, off int64, v byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{v}, off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedWALIsRefused is TestDamagedStorageIsRefused for the raft-wal
// log store: raft-wal would delete or cut back what it cannot read, so
// coordd checks the segments first and refuses with one clear line.
func TestDamagedWALIsRefused(t *testing.T) {
	seed := seededWALDataDir(t)
	wal := func(d string) string { return filepath.Join(d, datadir.WALDir) }
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"tail segment truncated", func(t *testing.T, d string) {
			s := segmentFiles(t, d)
			os.Truncate(s[len(s)-1], walSegmentSize/2)
		}, "truncated"},
		{"sealed segment truncated", func(t *testing.T, d string) {
			os.Truncate(segmentFiles(t, d)[0], 100)
		}, "truncated"},
		{"sealed segment entry bit-flipped", func(t *testing.T, d string) {
			s := segmentFiles(t, d)[0]
			flipBytes(t, s, frames(t, s, 1)[1]+12, 1)
		}, "fails its checksum"},
		{"tail segment: early entry bit-flipped", func(t *testing.T, d string) {
			s := segmentFiles(t, d)
			tail := s[len(s)-1]
			flipBytes(t, tail, frames(t, tail, 1)[0]+12, 1)
		}, "fails its checksum and more frames follow"},
		{"tail segment: frame header garbled", func(t *testing.T, d string) {
			s := segmentFiles(t, d)
			tail := s[len(s)-1]
			setByte(t, tail, frames(t, tail, 1)[1], 9)
		}, "malformed frame header"},
		{"sealed segment deleted", func(t *testing.T, d string) { os.Remove(segmentFiles(t, d)[0]) }, "is missing"},
		{"wal-meta.db deleted", func(t *testing.T, d string) { os.Remove(filepath.Join(wal(d), "wal-meta.db")) },
			"segment files but no wal-meta.db"},
		{"wal-meta.db meta pages bit-flipped", func(t *testing.T, d string) {
			p := filepath.Join(wal(d), "wal-meta.db")
			flipBytes(t, p, 20, 32)
			flipBytes(t, p, 4096+20, 32)
		}, "wal-meta.db"},
		{"wal/ deleted", func(t *testing.T, d string) { os.RemoveAll(wal(d)) }, "records the wal log store but wal/ is missing"},
		{"wal/ replaced by a file", func(t *testing.T, d string) {
			os.RemoveAll(wal(d))
			os.WriteFile(wal(d), []byte("not a directory"), 0o644)
		}, "wal is a file, not the directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, seed)
			tc.damage(t, dir)
			wantDamaged(t, dir, walOpenCfg(dir), tc.want)
		})
	}
	t.Run("undamaged copy opens", func(t *testing.T) {
		n, err := raftnode.Open(walOpenCfg(copyDir(t, seed)))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		n.Shutdown()
	})
	t.Run("torn last batch is dropped, not refused", func(t *testing.T) {
		// Power lost before the last append's fsync: its commit frame fails
		// its checksum and only zeros follow. The append was never
		// acknowledged, so the log ends one entry earlier.
		dir := copyDir(t, seed)
		before, err := datadir.InspectDataDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		s := segmentFiles(t, dir)
		tail := s[len(s)-1]
		es := frames(t, tail, 1)
		flipBytes(t, tail, es[len(es)-1]+12, 1)
		after, err := datadir.InspectDataDir(dir)
		if err != nil {
			t.Fatalf("inspect with a torn last batch: %v", err)
		}
		if after.LastIndex != before.LastIndex-1 {
			t.Fatalf("last index %d after tearing the last batch, want %d", after.LastIndex, before.LastIndex-1)
		}
		n, err := raftnode.Open(walOpenCfg(dir))
		if err != nil {
			t.Fatalf("Open with a torn last batch: %v", err)
		}
		n.Shutdown()
	})
}

// TestLogStoreIsRecordedAndKept: a data dir records the log store it was
// created with; opening it with the other one is refused, without changing
// anything, and an older data dir (no record) counts as bolt.
func TestLogStoreIsRecordedAndKept(t *testing.T) {
	walDir := seededWALDataDir(t)
	boltDir := seededDataDir(t)
	cases := []struct {
		name, dir, open, recorded string
		prepare                   func(t *testing.T, dir string)
	}{
		{"wal data dir opened with bolt", walDir, datadir.LogStoreBolt, datadir.LogStoreWAL, nil},
		{"bolt data dir opened with wal", boltDir, datadir.LogStoreWAL, datadir.LogStoreBolt, nil},
		{"older bolt data dir (no record) opened with wal", boltDir, datadir.LogStoreWAL, datadir.LogStoreBolt, dropLogStoreKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, tc.dir)
			if tc.prepare != nil {
				tc.prepare(t, dir)
			}
			before := listing(t, dir)
			cfg := openCfg(dir)
			cfg.LogStore = tc.open
			n, err := raftnode.Open(cfg)
			if err == nil {
				n.Shutdown()
				t.Fatal("Open accepted the other log store")
			}
			var me *datadir.LogStoreMismatchError
			if !errors.As(err, &me) || me.Recorded != tc.recorded || !strings.Contains(err.Error(), "--raft-log-store "+tc.recorded) {
				t.Fatalf("Open error %v, want a LogStoreMismatchError naming %s", err, tc.recorded)
			}
			if after := listing(t, dir); after != before {
				t.Fatalf("refusal changed the data dir:\nbefore %s\nafter  %s", before, after)
			}
			// Without a choice the recorded store is used.
			cfg = openCfg(dir)
			cfg.LogStore = ""
			n, err = raftnode.Open(cfg)
			if err != nil {
				t.Fatalf("Open with the recorded store: %v", err)
			}
			n.Shutdown()
			rep, err := datadir.InspectDataDir(dir)
			if err != nil || rep.LogStore != tc.recorded {
				t.Fatalf("inspect: %v, log store %q, want %q", err, rep.LogStore, tc.recorded)
			}
		})
	}
}

// TestNewDataDirGetsTheDefaultLogStore: a data dir with no raft state,
// opened without a choice, is created on DefaultLogStore (raft-wal) and
// records it; reopened without a choice it stays there.
func TestNewDataDirGetsTheDefaultLogStore(t *testing.T) {
	if datadir.DefaultLogStore != datadir.LogStoreWAL {
		t.Fatalf("DefaultLogStore = %q, want %q (docs/operations.md#raft-log-store)", datadir.DefaultLogStore, datadir.LogStoreWAL)
	}
	dir := filepath.Join(t.TempDir(), "data")
	for round := range 2 {
		cfg := openCfg(dir)
		cfg.LogStore = ""
		n, err := raftnode.Open(cfg)
		if err != nil {
			t.Fatalf("open %d: %v", round, err)
		}
		if round == 0 {
			if err := n.Bootstrap([]raftnode.Peer{{ID: cfg.ID, RaftAddr: cfg.RaftAddr}}); err != nil {
				t.Fatal(err)
			}
		}
		n.Shutdown()
		rep, err := datadir.InspectDataDir(dir)
		if err != nil || rep.LogStore != datadir.LogStoreWAL {
			t.Fatalf("after open %d: inspect %v, log store %q, want %q", round, err, rep.LogStore, datadir.LogStoreWAL)
		}
		if _, err := os.Stat(filepath.Join(dir, datadir.WALDir)); err != nil {
			t.Fatalf("after open %d: no %s/: %v", round, datadir.WALDir, err)
		}
	}
}

// dropLogStoreKey makes a data dir look like one written before coordd
// recorded the log store.
func dropLogStoreKey(t *testing.T, dir string) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, datadir.RaftDBFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("conf")).Delete([]byte("coordd.LogStore")) }); err != nil {
		t.Fatal(err)
	}
}

// TestWALInspectRecoverRestore runs the offline operations on a raft-wal
// data dir: inspect rebuilds the same state as a member that reopens it,
// recover rewrites the configuration, restore seeds a wal member.
func TestWALInspectRecoverRestore(t *testing.T) {
	dir, final := seededWALDataDirState(t)
	rep, err := datadir.InspectDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LogStore != datadir.LogStoreWAL || rep.FirstIndex == 0 || rep.LastIndex <= rep.Snapshots[0].Index {
		t.Fatalf("inspect: store %q, log %d..%d, newest snapshot at %d", rep.LogStore, rep.FirstIndex, rep.LastIndex, rep.Snapshots[0].Index)
	}
	if !bytes.Equal(snapshotBytes(t, rep.State), final) {
		t.Fatal("inspect rebuilt another state than the member had when it stopped")
	}

	servers := []raftnode.Server{{ID: "n0", RaftAddr: "inmem-n0", Voter: true}, {ID: "n9", RaftAddr: "inmem-n9", Voter: true}}
	if err := raftnode.RecoverDataDir(dir, servers); err != nil {
		t.Fatalf("recover: %v", err)
	}
	after, err := datadir.InspectDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Configuration) != 2 || after.LogStore != datadir.LogStoreWAL {
		t.Fatalf("after recover: configuration %v, store %q", after.Configuration, after.LogStore)
	}

	var snap bytes.Buffer
	if err := rep.State.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	rdir := filepath.Join(t.TempDir(), "restored")
	if _, err := datadir.RestoreDataDir(datadir.RestoreConfig{Dir: rdir, ID: "n0", RaftAddr: "inmem-n0",
		Body: &snap, Index: rep.LastIndex, Term: rep.LastTerm, LogStore: datadir.LogStoreWAL,
		IDFloor: rep.State.NextID() + 1000}); err != nil {
		t.Fatal(err)
	}
	// The allocator floors entry went into the wal log.
	if rr, err := datadir.InspectDataDir(rdir); err != nil || rr.LogStore != datadir.LogStoreWAL || rr.LastIndex != rep.LastIndex+1 {
		t.Fatalf("restored data dir: %v; store %q, last index %d, want %d", err, rr.LogStore, rr.LastIndex, rep.LastIndex+1)
	}
	cfg := openCfg(rdir)
	cfg.LogStore = datadir.LogStoreBolt
	var me *datadir.LogStoreMismatchError
	if n, err := raftnode.Open(cfg); !errors.As(err, &me) {
		if err == nil {
			n.Shutdown()
		}
		t.Fatalf("restored wal data dir opened with bolt: %v", err)
	}
	n, err := raftnode.Open(walOpenCfg(rdir))
	if err != nil {
		t.Fatalf("open the restored wal data dir: %v", err)
	}
	n.Shutdown()
}

// TestWALSnapshotFallback: with raft-wal too, a bit-flipped newest snapshot
// falls back to the older one while the log still covers it.
func TestWALSnapshotFallback(t *testing.T) {
	checkSnapshotFallback(t, func(i int, cfg *raftnode.Config) {
		useWAL(i, cfg)
		cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval = 64, 400, time.Hour
	}, walOpenCfg)
}

// TestBoltFreelistSettingsInterchange: raft.db is now opened without a
// synced freelist (and a hashmap one); a data dir written with bbolt's
// defaults opens with the new settings and the other way round, keeping
// every entry (older and newer coordd binaries share data dirs).
func TestBoltFreelistSettingsInterchange(t *testing.T) {
	old := func(_ int, cfg *raftnode.Config) {
		cfg.BoltOptions = func(o *bolt.Options) { o.NoFreelistSync, o.FreelistType = false, bolt.FreelistArrayType }
	}
	c := newCluster(t, 1, withConfig(old))
	n := c.node(c.waitLeader())
	writeEntries(t, n, "old", 50)
	// What the entries decided (a reopened member may add its own
	// LeaderEstablished entries, which change neither).
	wantNext, wantMembers := n.State().NextID(), len(n.State().Members())
	dir := c.cfgs[0].DataDir
	c.stop(0)
	for _, tc := range []struct {
		name string
		opt  func(*bolt.Options)
	}{
		{"new settings on an old file", nil},
		{"old settings on a file the new ones wrote", func(o *bolt.Options) { o.NoFreelistSync, o.FreelistType = false, bolt.FreelistArrayType }},
		{"new settings again", nil},
	} {
		rep, err := datadir.InspectDataDir(dir)
		if err != nil {
			t.Fatalf("%s: inspect: %v", tc.name, err)
		}
		if rep.State.NextID() != wantNext || len(rep.State.Members()) != wantMembers {
			t.Fatalf("%s: state read back: next ID %d, %d members; want %d, %d", tc.name,
				rep.State.NextID(), len(rep.State.Members()), wantNext, wantMembers)
		}
		cfg := openCfg(dir)
		cfg.BoltOptions = tc.opt
		n, err := raftnode.Open(cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := n.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}
}
