package raftnode

import (
	"fmt"
	"io"

	"github.com/hashicorp/raft"
)

// A member refuses to install a snapshot older than what it has applied.
//
// hashicorp/raft (v1.8.0, installSnapshot) installs any snapshot a leader of
// its current term sends: it restores the FSM from it, sets lastApplied back
// to the snapshot's index and keeps its log as it is. The next commit makes
// processLogs read every entry from that index on from the log, and a member
// whose log does not hold them panics there ("log not found"). Such a
// snapshot comes from a replication stream that was overtaken:
//
//   - raft lets the replication goroutine of a removed member finish its last
//     attempt, to the member's address. When the member is replaced (same ID
//     and address, an empty data dir, --join), the replacement first installs
//     the leader's newest snapshot through the stream raft starts for it, and
//     its log starts after that snapshot; the old goroutine's snapshot, opened
//     earlier, is older (track record row 2 of jepsen-style-tests/README.md).
//   - a request held in a slow link or a fault proxy (or by the raft-delay
//     fault injection) arrives after the leader's later ones.
//
// A snapshot the leader sends because the member needs it is never older
// than what the member has applied: the leader sends one only when it lacks
// an entry at or after the point where the member's log agrees with its own,
// which is at or after the member's applied index, and it lacks only entries
// its newest snapshot covers. So the refusal never holds a member back; it
// fails the overtaken stream's request, and that stream retries with the
// leader's newest snapshot or ends.
//
// The check runs inside raft's installSnapshot, on raft's main goroutine:
// the wrapper hands raft the snapshot's data through snapshotGuard, which
// compares the snapshot's index with raft's applied index on raft's first
// read. raft reads right after it created the snapshot's file and before it
// changes anything, and it changes lastApplied only on that goroutine, so
// the comparison sees what the install would replace. (A check when the
// request arrives could not: raft may still be installing a newer snapshot
// received just before it.) On the refusal raft cancels the file and answers
// the leader with the error; the data after it passes through unchecked, so
// raft drains the request from the connection as usual.

// StaleSnapshotError is the refusal of a snapshot older than the member's
// applied state.
type StaleSnapshotError struct {
	Index   uint64 // the snapshot's last index
	Applied uint64 // what the member had applied
}

func (e *StaleSnapshotError) Error() string {
	return fmt.Sprintf("coordd member refused the snapshot at index %d: it has already applied up to index %d "+
		"(installing it would take its state back and lose the log entries after it)", e.Index, e.Applied)
}

// guardSnapshot makes the data of an InstallSnapshot request check the
// snapshot against raft's applied index before raft uses it.
func (w *commitWatch) guardSnapshot(rpc *raft.RPC) {
	req, ok := rpc.Command.(*raft.InstallSnapshotRequest)
	if !ok || rpc.Reader == nil {
		return
	}
	rpc.Reader = &snapshotGuard{data: rpc.Reader, index: req.LastLogIndex, w: w}
}

// snapshotGuard is an InstallSnapshot request's data; raft's first read
// checks the snapshot (see above). Only raft's main goroutine reads it.
type snapshotGuard struct {
	data    io.Reader
	index   uint64
	w       *commitWatch
	checked bool
}

func (g *snapshotGuard) Read(p []byte) (int, error) {
	if !g.checked {
		g.checked = true
		if err := g.w.checkSnapshot(g.index); err != nil {
			return 0, err
		}
	}
	return g.data.Read(p)
}

// checkSnapshot refuses a snapshot at index below raft's applied index. A
// snapshot at the applied index holds the state the member already has.
func (w *commitWatch) checkSnapshot(index uint64) error {
	vp := w.view.Load()
	if vp == nil {
		// raft's goroutines start inside NewRaft, just before Open hands
		// raft to the wrapper. The leader retries.
		return fmt.Errorf("coordd member refused the snapshot at index %d: raft is not running yet", index)
	}
	if applied := (*vp).AppliedIndex(); index < applied {
		w.logger.Warn("refused a snapshot older than the applied state (from an overtaken replication stream)",
			"snapshot_index", index, "applied_index", applied)
		w.refusedSnapshots.Add(1)
		return &StaleSnapshotError{Index: index, Applied: applied}
	}
	return nil
}

// RefusedSnapshots counts the snapshots this member refused as older than
// its applied state.
func (n *Node) RefusedSnapshots() uint64 { return n.watch.refusedSnapshots.Load() }
