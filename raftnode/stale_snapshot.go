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

// A member also refuses a snapshot that its log already holds, with more
// after it: the entry at the snapshot's index has the snapshot's term, so
// by raft's log matching the snapshot is a prefix of what the member has.
// Installing it would do harm on a monotonic log store (raft-wal): raft
// v1.8.0 then deletes the whole log, the entries after the snapshot
// included, while its in-memory last index still counts them, and the
// next commit panics reading one ("log not found"), after which the data
// dir is refused as damaged. Such a snapshot, too, only comes from an
// overtaken stream: a leader sends a snapshot to a member whose log
// matches its own at the snapshot's index only when it has no entry after
// it, and this member has one.

// StaleSnapshotError is the refusal of a snapshot older than the member's
// applied state, or one its log already holds with more after it.
type StaleSnapshotError struct {
	Index   uint64 // the snapshot's last index
	Applied uint64 // what the member had applied
	// Last is the member's last log index when the refusal is of a
	// snapshot its log already holds (0 otherwise).
	Last uint64
}

func (e *StaleSnapshotError) Error() string {
	if e.Last > 0 {
		return fmt.Sprintf("coordd member refused the snapshot at index %d: its log already holds that entry, with the same term, "+
			"and entries after it up to index %d (installing it would delete them)", e.Index, e.Last)
	}
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
	rpc.Reader = &snapshotGuard{data: rpc.Reader, index: req.LastLogIndex, term: req.LastLogTerm, w: w}
}

// snapshotGuard is an InstallSnapshot request's data; raft's first read
// checks the snapshot (see above). Only raft's main goroutine reads it.
type snapshotGuard struct {
	data    io.Reader
	index   uint64
	term    uint64
	w       *commitWatch
	checked bool
}

func (g *snapshotGuard) Read(p []byte) (int, error) {
	if !g.checked {
		g.checked = true
		if err := g.w.checkSnapshot(g.index, g.term); err != nil {
			return 0, err
		}
	}
	return g.data.Read(p)
}

// checkSnapshot refuses a snapshot at index below raft's applied index, and
// one at a lower index than raft's last whose entry the member's log holds
// with the snapshot's term (see above).
func (w *commitWatch) checkSnapshot(index, term uint64) error {
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
	last := (*vp).LastIndex()
	if index >= last || w.termAt == nil {
		return nil
	}
	if held, ok := w.termAt(index); ok && held == term {
		w.logger.Warn("refused a snapshot that the log already holds, with entries after it (from an overtaken replication stream)",
			"snapshot_index", index, "snapshot_term", term, "last_index", last)
		w.refusedSnapshots.Add(1)
		return &StaleSnapshotError{Index: index, Applied: (*vp).AppliedIndex(), Last: last}
	}
	return nil
}

// RefusedSnapshots counts the snapshots this member refused as older than
// its applied state.
func (n *Node) RefusedSnapshots() uint64 { return n.watch.refusedSnapshots.Load() }

// termAt is the term of the member's entry at index: from its log, or from
// its newest snapshot when that ends there (its log may be compacted up to
// it).
func (n *Node) termAt(index uint64) (uint64, bool) {
	var e raft.Log
	if err := n.logStore.GetLog(index, &e); err == nil {
		return e.Term, true
	}
	if snaps, err := n.snaps.List(); err == nil && len(snaps) > 0 && snaps[0].Index == index {
		return snaps[0].Term, true
	}
	return 0, false
}
