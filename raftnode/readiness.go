package raftnode

import (
	"fmt"
	"time"
)

// DefaultReadyMaxLag is how many committed entries a member may not yet
// have applied and still call itself ready (coordd --ready-max-lag). A
// healthy follower trails the leader by the entries in flight, a few
// append batches (256 entries each) at most; a member that missed a
// snapshot's worth (8192 entries by default) or stores nothing is far
// beyond it.
const DefaultReadyMaxLag = 1024

// maxApplyLag is how far this member's FSM may trail its own commit index:
// under write load a follower is always a few entries behind for a moment,
// and a probe that flapped on that would be useless.
const maxApplyLag = 64

// Readiness is whether a member should be sent traffic, with the numbers it
// was judged on.
type Readiness struct {
	Ready  bool
	Status string // "ready", or why not
	// LeaderID is the leader this member knows ("" when none).
	LeaderID string
	// CommitIndex is this member's own commit index; it cannot pass the
	// end of its own log.
	CommitIndex uint64
	// AppliedIndex is the last entry this member's state includes.
	AppliedIndex uint64
	// LeaderCommitIndex is the highest commit index heard from a leader:
	// the cluster has committed at least this much.
	LeaderCommitIndex uint64
	// FailingSince is when a durable write (its term and vote, its log,
	// a snapshot) began failing (Status says which and why), or zero.
	FailingSince time.Time
	// DiskFull says that write fails because the disk is full.
	DiskFull bool
}

// Readiness judges whether this member is ready: its last durable write of
// each kind (term and vote, log, snapshot) did not fail, a leader is known,
// it has applied what it knows to be committed (within maxApplyLag), and
// it is no more than maxLag entries
// behind the highest commit index a leader has told it about. The last rule
// catches a member whose own numbers look current because it stores
// nothing new: a follower that cannot append, or one stuck installing a
// snapshot, while the leader commits on. A follower that has not yet heard
// any commit index from a leader (just started) is not ready either.
func (n *Node) Readiness(maxLag uint64) Readiness {
	leader, _ := n.Leader()
	r := Readiness{
		LeaderID:          leader,
		CommitIndex:       n.raft.CommitIndex(),
		AppliedIndex:      n.fsm.delivered.Load(),
		LeaderCommitIndex: n.watch.heard.Load(),
	}
	if leader == n.cfg.ID {
		// The leader hears no commit index but its own; what it heard as a
		// follower is stale.
		r.LeaderCommitIndex = max(r.LeaderCommitIndex, r.CommitIndex)
	}
	faults := n.StorageFaults()
	switch {
	case len(faults) > 0:
		// First: a member that cannot write is out of the cluster or
		// about to be, whatever else it knows (StorageFault).
		r.Status, r.FailingSince, r.DiskFull = faults[0].Error(), faults[0].Since, faults[0].DiskFull
	case leader == "":
		r.Status = "no leader known"
	case r.LeaderCommitIndex == 0 && leader != n.cfg.ID:
		r.Status = "no commit index heard from the leader yet"
	case r.LeaderCommitIndex > r.AppliedIndex+maxLag:
		r.Status = fmt.Sprintf("far behind the leader: applied index %d, the cluster has committed at least %d "+
			"(%d entries behind, more than --ready-max-lag %d)",
			r.AppliedIndex, r.LeaderCommitIndex, r.LeaderCommitIndex-r.AppliedIndex, maxLag)
	case r.CommitIndex > r.AppliedIndex+maxApplyLag:
		r.Status = "catching up"
	default:
		r.Ready, r.Status = true, "ready"
	}
	return r
}
