package raftnode

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode/datadir"
)

// TestLogAppendOnFullDiskIsNamed: an append raft-wal or bolt refuses for
// want of space is a disk-full fault of the log (what /readyz, the metric
// and the status page show); another error is a fault but not a full disk.
func TestLogAppendOnFullDiskIsNamed(t *testing.T) {
	full := &os.PathError{Op: "write", Path: "wal/00000000000000000002-0000000000000401.wal", Err: syscall.ENOSPC}
	fs := &failingStore{LogStore: raft.NewInmemStore(), err: full}
	n := &Node{logs: &watchedLogStore{LogStore: fs}}
	if err := n.logs.StoreLogs([]*raft.Log{{Index: 1}}); err == nil {
		t.Fatal("StoreLogs succeeded")
	}
	faults := n.StorageFaults()
	if len(faults) != 1 || faults[0].Write != datadir.WriteLog || !n.DiskFull() ||
		!strings.HasPrefix(faults[0].Error(), "disk full: cannot append to its raft log: write wal/") {
		t.Fatalf("faults %v, DiskFull %v", faults, n.DiskFull())
	}
	fs.err = &os.PathError{Op: "write", Path: "raft.db", Err: syscall.EIO}
	n.logs.StoreLogs([]*raft.Log{{Index: 1}})
	if n.DiskFull() || len(n.StorageFaults()) != 1 || strings.HasPrefix(n.StorageFaults()[0].Error(), "disk full") {
		t.Fatalf("an I/O error reads as %v, DiskFull %v", n.StorageFaults(), n.DiskFull())
	}
	fs.err = nil
	if err := n.logs.StoreLogs([]*raft.Log{{Index: 1}}); err != nil {
		t.Fatal(err)
	}
	if len(n.StorageFaults()) != 0 {
		t.Fatalf("faults after a successful append: %v", n.StorageFaults())
	}
}
