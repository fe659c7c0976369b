package harness

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
	"github.com/coordd/coordd/testutil"
)

// Storage faults on a stopped member's data dir (nemesis disk-loss and
// storage-damage). The file names are coordd's: raft.db (bolt log and
// stable store), identity.json, snapshots/<id>/{meta.json,state.bin}.

const boltPage = 4096

// Damage applies a storage fault to stopped member i's data dir.
func (c *Cluster) Damage(i int, damage string) (nemesis.DamageResult, error) {
	if st := c.State(i); st != Stopped {
		return nemesis.DamageResult{}, fmt.Errorf("damage %s: it is %s", c.members[i].ID, st)
	}
	dir := c.members[i].DataDir
	if isWALDamage(damage) {
		return c.damageWAL(dir, damage)
	}
	detail, err := damageFiles(dir, damage)
	return nemesis.DamageResult{Detail: detail}, err
}

// LogStore is the log store of member i's data dir: wal when it has a
// wal/ directory.
func (c *Cluster) LogStore(i int) string {
	if fi, err := os.Stat(filepath.Join(c.members[i].DataDir, "wal")); err == nil && fi.IsDir() {
		return "wal"
	}
	return "bolt"
}

// damageFiles applies one of the damages to raft.db and the snapshots.
func damageFiles(dir, damage string) (string, error) {
	db := filepath.Join(dir, "raft.db")
	snaps := snapshotDirs(dir)
	switch damage {
	case nemesis.LoseRaftDB:
		return "raft.db deleted", ignoreMissing(os.Remove(db))
	case nemesis.WipeDataDir:
		return "data dir deleted", os.RemoveAll(dir)
	case nemesis.TruncateRaftDB:
		fi, err := os.Stat(db)
		if err != nil {
			return "", err
		}
		size := max(fi.Size()/2/boltPage*boltPage, 3*boltPage)
		return fmt.Sprintf("raft.db cut from %d to %d bytes", fi.Size(), size), os.Truncate(db, size)
	case nemesis.FlipRaftDB:
		fi, err := os.Stat(db)
		if err != nil {
			return "", err
		}
		pages := fi.Size() / boltPage
		for p := int64(2); p < pages; p++ {
			if err := flip(db, p*boltPage+16, 64); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("64 bytes flipped in each of %d pages", max(pages-2, 0)), nil
	case nemesis.DropSnapshots:
		if len(snaps) == 0 {
			return "no snapshot to drop", nil
		}
		return fmt.Sprintf("%d snapshots deleted", len(snaps)), os.RemoveAll(filepath.Join(dir, "snapshots"))
	case nemesis.GarbleSnapshotMeta:
		for _, s := range snaps {
			if err := os.WriteFile(filepath.Join(s, "meta.json"), []byte("garbage"), 0o600); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%d meta.json garbled", len(snaps)), nil
	case nemesis.FlipSnapshots:
		for _, s := range snaps {
			if err := flip(filepath.Join(s, "state.bin"), 8, 1); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%d state.bin flipped", len(snaps)), nil
	case nemesis.HoleInLog:
		detail, punched, err := holeInLog(db, newestSnapshot(snaps))
		if err != nil || punched || len(snaps) < 2 {
			return detail, err
		}
		// Too few entries after the newest snapshot: drop it, so raft
		// would restore the older one and read the log from there.
		newest := ""
		for _, s := range snaps {
			if newestSnapshot([]string{s}) == newestSnapshot(snaps) {
				newest = s
			}
		}
		if err := os.RemoveAll(newest); err != nil {
			return "", err
		}
		rest := snapshotDirs(dir)
		d2, _, err := holeInLog(db, newestSnapshot(rest))
		return "newest snapshot " + filepath.Base(newest) + " deleted; " + d2, err
	}
	return "", fmt.Errorf("unknown damage %q", damage)
}

// snapshotDirs lists the finished snapshots (a member killed while writing
// one leaves a <id>.tmp directory, which coordd ignores).
func snapshotDirs(dir string) []string {
	all, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*"))
	var out []string
	for _, s := range all {
		if !strings.HasSuffix(s, ".tmp") {
			out = append(out, s)
		}
	}
	return out
}

// newestSnapshot is the highest index among snapshot directories named
// term-index-time (0: none).
func newestSnapshot(snaps []string) uint64 {
	var newest uint64
	for _, s := range snaps {
		var term, idx, ts uint64
		if _, err := fmt.Sscanf(filepath.Base(s), "%d-%d-%d", &term, &idx, &ts); err == nil && idx > newest {
			newest = idx
		}
	}
	return newest
}

// holeInLog deletes the log entry halfway between the snapshot index and
// the end of the log, if there are at least two entries after the snapshot
// (otherwise there is nothing raft would read through, and it says so).
func holeInLog(db string, snap uint64) (detail string, punched bool, err error) {
	b, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return "", false, fmt.Errorf("open %s: %w", db, err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		logs := tx.Bucket([]byte("logs"))
		if logs == nil {
			detail = "no log to punch a hole in"
			return nil
		}
		k, _ := logs.Cursor().Last()
		if k == nil {
			detail = "no log to punch a hole in"
			return nil
		}
		last := binary.BigEndian.Uint64(k)
		if last < snap+2 {
			detail = fmt.Sprintf("no entry between the newest snapshot (%d) and the end of the log (%d) to delete", snap, last)
			return nil
		}
		victim := snap + 1 + (last-snap-1)/2
		key := binary.BigEndian.AppendUint64(nil, victim)
		if logs.Get(key) == nil {
			detail = fmt.Sprintf("log entry %d already missing", victim)
			return nil
		}
		detail, punched = fmt.Sprintf("log entry %d of %d..%d deleted (newest snapshot %d)", victim, snap+1, last, snap), true
		return logs.Delete(key)
	})
	return detail, punched, err
}

func ignoreMissing(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// flip inverts n bytes of path at off (fewer if the file is shorter).
func flip(path string, off int64, n int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return err
	}
	for j := range buf[:k] {
		buf[j] ^= 0xff
	}
	_, err = f.WriteAt(buf[:k], off)
	return err
}

// StartJoining starts member i from now on as a replacement: with --join
// through a running member instead of --peers.
func (c *Cluster) StartJoining(i int) error {
	c.mu.Lock()
	via := ""
	for j, m := range c.members {
		if j != i && c.state[j] == Running {
			via = m.GRPCAddr
			break
		}
	}
	if via == "" {
		c.mu.Unlock()
		return fmt.Errorf("start %s joining: no running member to join through", c.members[i].ID)
	}
	if c.join == nil {
		c.join = map[int]string{}
	}
	c.join[i] = via
	c.mu.Unlock()
	return c.Start(i)
}

// TryStart starts member i with its usual command line and waits up to
// within for it to exit. An exit is expected here (it is not a crash); all
// its output is returned, not only the last line: the refusal is the last
// thing main prints, but a raft transport goroutine may still log a line
// (a refused connection from a peer) before the process is gone. A member
// still running then stays running, as after Start.
func (c *Cluster) TryStart(i int, within time.Duration) (bool, string, error) {
	var out testutil.Buffer
	exited := make(chan error, 1)
	c.mu.Lock()
	// The data dir is not created: a missing one is what some faults test.
	spec := c.spec(i, "trying")
	spec.Banner += " (a refusal is expected)"
	spec.Tee = &out
	p, err := c.startLocked(i, spec, true, exited)
	c.mu.Unlock()
	if err != nil {
		return false, "", err
	}
	select {
	case <-exited:
		<-p.child.Done()
		return true, out.String(), nil
	case <-time.After(within):
		c.mu.Lock()
		p.adopted = c.procs[i] == p
		c.mu.Unlock()
		return false, "", nil
	}
}
