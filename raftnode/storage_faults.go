package raftnode

import (
	"time"

	"github.com/coordd/coordd/raftnode/datadir"
)

// StorageFaults lists the kinds of durable write this member keeps failing
// to make, the most serious first (empty: every kind's last write
// succeeded).
func (n *Node) StorageFaults() []datadir.StorageFault {
	var out []datadir.StorageFault
	for _, k := range []struct {
		write string
		f     *datadir.WriteFault
	}{
		{datadir.WriteTermVote, n.storage.StableFault()},
		{datadir.WriteLog, &n.logs.fault},
		{datadir.WriteSnapshot, n.storage.SnapshotFault()},
	} {
		if sf, ok := k.f.Fault(k.write); ok {
			out = append(out, sf)
		}
	}
	return out
}

// DiskFull says whether a durable write of this member is failing because
// its file system has no space left (coordd_storage_disk_full).
func (n *Node) DiskFull() bool {
	for _, f := range n.StorageFaults() {
		if f.DiskFull {
			return true
		}
	}
	return false
}

// settleTimeout is how long Shutdown lets the entries already with raft be
// answered: not at all while a term or vote write waits, since raft
// answers nothing until it returns.
func (n *Node) settleTimeout() time.Duration {
	if n.storage.StableWaiting() {
		return 0
	}
	return shutdownSettleTimeout
}
