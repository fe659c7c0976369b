package harness

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
	"github.com/coordd/coordd/testutil"
)

// Storage faults on a stopped member's data dir (nemesis disk-loss and
// storage-damage). The file names are coordd's: raft.db (bolt log and
// stable store), identity.json, snapshots/<id>/{meta.json,state.bin}.

const boltPage = 4096

// Damage applies a storage fault to stopped member i's data dir.
func (c *Cluster) Damage(i int, damage string) (string, error) {
	if st := c.State(i); st != Stopped {
		return "", fmt.Errorf("damage %s: it is %s", c.members[i].ID, st)
	}
	dir := c.members[i].DataDir
	db := filepath.Join(dir, "raft.db")
	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*"))
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
	}
	return "", fmt.Errorf("unknown damage %q", damage)
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
// within for it to exit. An exit is expected here (it is not a crash); its
// last output line is returned. A member still running then stays running,
// as after Start.
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
		return true, lastLine(out.String()), nil
	case <-time.After(within):
		c.mu.Lock()
		p.adopted = c.procs[i] == p
		c.mu.Unlock()
		return false, "", nil
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
