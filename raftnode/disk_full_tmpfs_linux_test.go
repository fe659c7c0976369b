//go:build linux

package raftnode_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// mountTmpfs mounts a tmpfs of size bytes at a new directory and returns
// it, or skips the test where mounting is not allowed (it needs root with
// CAP_SYS_ADMIN; CI has it, a developer's shell or a container may not).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs to fill (%v); this test needs root with mount rights", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes a file into dir until the file system has no byte left
// and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", dir, err)
				}
				break
			}
		}
	}
	return path
}

// TestFullDiskOnRealFileSystem is probe D15 on a real file system: a raft-wal
// member's data dir on a tmpfs filled to its last byte. Its snapshot fails
// and leaves no temporary directory; the next election makes it store a
// term it has no space for, and instead of panicking ("failed to save
// current term: write vote.json.tmp: no space left on device") it says
// "disk full" and takes no part; once the filler is removed it stores the
// term, rejoins and catches up by itself.
func TestFullDiskOnRealFileSystem(t *testing.T) {
	fs := mountTmpfs(t, 16<<20)
	const victim = 2
	c := newCluster(t, 3, withConfig(func(i int, cfg *raftnode.Config) {
		cfg.LogStore, cfg.WALSegmentSize = datadir.LogStoreWAL, 1<<20
		if i == victim {
			cfg.DataDir = filepath.Join(fs, "n2")
		}
	}))
	leader := c.waitLeader()
	if leader == victim {
		if err := transferLeadership(c.node(victim), c.node(0)); err != nil {
			t.Fatal(err)
		}
		leader = c.waitLeader(victim)
	}
	c.writeOnLeader("before", 20)
	c.waitConverged(0, 1, 2)
	v := c.node(victim)
	filler := fillDisk(t, fs)

	if err := v.Snapshot(); err == nil {
		t.Fatal("a snapshot succeeded on a full disk")
	}
	entries, err := os.ReadDir(filepath.Join(fs, "n2", "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("the failed snapshot left %s", e.Name())
		}
	}
	if !v.DiskFull() {
		t.Fatalf("DiskFull is false after a snapshot failed for want of space: %v", v.StorageFaults())
	}

	electAround(t, c, leader, victim)
	waitFor(t, opTimeout, func() bool {
		r := v.Readiness(raftnode.DefaultReadyMaxLag)
		return !r.Ready && strings.HasPrefix(r.Status, "disk full: cannot store its term and vote")
	}, "n2 not ready, saying it cannot store its term")
	c.writeOnLeader("during", 10, victim)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, opTimeout, func() bool { return len(v.StorageFaults()) == 0 || onlySnapshotFault(v) },
		"n2 stores its term and log again")
	if err := v.Snapshot(); err != nil {
		t.Fatalf("snapshot after space returned: %v", err)
	}
	waitFor(t, opTimeout, func() bool { return v.Readiness(raftnode.DefaultReadyMaxLag).Ready }, "n2 ready again")
	c.writeOnLeader("after", 2)
	c.waitConverged(0, 1, 2)
}

// onlySnapshotFault: the one fault left is a snapshot's (it clears at the
// next snapshot, which raft takes only past its threshold).
func onlySnapshotFault(n *raftnode.Node) bool {
	f := n.StorageFaults()
	return len(f) == 1 && f[0].Write == datadir.WriteSnapshot
}
