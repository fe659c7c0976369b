package raftnode

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode/datadir"
)

// Server is one entry of the raft configuration (datadir.Server: the
// offline tools read and write the same entries).
type Server = datadir.Server

// Configuration returns the latest raft configuration (committed or not).
// The slice is shared with other callers and must not be modified; it is
// the same slice (same backing array) for as long as the configuration is
// unchanged (configCache).
func (n *Node) Configuration() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read raft configuration: %w", err)
	}
	return n.configs.get(f.Configuration().Servers), nil
}

// AddVoter adds (or updates the address of) a voting member. Leader only.
func (n *Node) AddVoter(id, raftAddr string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	term := n.raft.CurrentTerm()
	n.lease.pause()
	err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, 10*time.Second).Error()
	n.lease.resume(term, err == nil, n.lease.now())
	if err != nil {
		return n.membershipError("add voter "+id, err)
	}
	return nil
}

// RemoveServer removes a member. Leader only.
func (n *Node) RemoveServer(id string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	term := n.raft.CurrentTerm()
	n.lease.pause()
	err := n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error()
	n.lease.resume(term, err == nil, n.lease.now())
	if err != nil {
		return n.membershipError("remove "+id, err)
	}
	return nil
}

// TransferLeadership hands leadership to target, or to the most up-to-date
// voter when target is empty. Leader only.
func (n *Node) TransferLeadership(targetID, targetAddr string) error {
	if !n.IsLeader() {
		return n.notLeader()
	}
	// The target's election bypasses the followers' refusal to vote while
	// they know a leader: no lease for the rest of this term. The
	// TimeoutNow carries this term, and a member accepts it only in this
	// term from this leader (transfer_guard.go).
	term := n.raft.CurrentTerm()
	n.lease.end(term)
	n.watch.startTransfer(term)
	var f raft.Future
	if targetID == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		f = n.raft.LeadershipTransferToServer(raft.ServerID(targetID), raft.ServerAddress(targetAddr))
	}
	if err := f.Error(); err != nil {
		return n.transferError(err)
	}
	return nil
}

// raftTransferTimeout is hashicorp/raft v1.8.0's error (made with
// fmt.Errorf, so matched by its text) when the leader has not stepped down
// within an election timeout of starting a transfer.
const raftTransferTimeout = "leadership transfer timeout"

// transferError classifies a leadership transfer's error. A timeout may
// come after the TimeoutNow reached its target, whose election can still
// make it leader: the outcome is unknown, never "failed".
func (n *Node) transferError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("transfer leadership: %w", n.notLeader())
	case err.Error() == raftTransferTimeout, errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("transfer leadership: %w (%w)", ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("transfer leadership: %w", err)
}

// membershipError classifies the error of a configuration change the way
// classifyApplyError does a proposal's: the change is a log entry, so once
// raft has dispatched it a lost leadership or a shutdown leaves its fate
// unknown (hashicorp/raft answers ErrLeadershipLost for every entry in
// flight, and the next leader may commit it), never "not the leader".
// Only raft's ErrNotLeader, answered before the change was dispatched,
// means nothing was done.
func (n *Node) membershipError(what string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%s: %w", what, n.notLeader())
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%s: %w (%w)", what, ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
