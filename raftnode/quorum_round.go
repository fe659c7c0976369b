package raftnode

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// quorumRound confirms that this member leads its current term: it sends
// every other voter a heartbeat of that term, sent after the round began,
// and needs a quorum (itself included) to accept it.
//
// A voter accepts an AppendEntries only if its term is not higher, and then
// holds the leader's term; if a leader of a later term had been elected
// before the round began, a quorum of voters would hold that later term and
// a quorum of acceptances could not exist. So a successful round proves no
// other leader existed when it began (as a committed entry would, without
// a log write). hashicorp's VerifyLeader is not used for this: it counts
// the answer to a heartbeat that was already in flight when the round was
// registered, so a leader resumed from a pause could confirm itself with an
// acknowledgement from before the pause.
//
// The heartbeat is the one raft's leader sends (no entries, no commit
// index), so a follower treats it exactly as raft's own.
func (n *Node) quorumRound() error {
	term := n.raft.CurrentTerm()
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("quorum round: read configuration: %w", err)
	}
	self := raft.ServerID(n.cfg.ID)
	var peers []raft.Server
	voters, acks := 0, 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if s.ID == self {
			acks++
		} else {
			peers = append(peers, s)
		}
	}
	need := voters/2 + 1
	if acks >= need {
		return n.confirmTerm(term)
	}
	local := n.trans.LocalAddr()
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: n.trans.EncodePeer(self, local)}
	answers := make(chan bool, len(peers))
	for _, p := range peers {
		go func() {
			req := &raft.AppendEntriesRequest{RPCHeader: header, Term: term}
			var resp raft.AppendEntriesResponse
			err := n.watch.Transport.AppendEntries(p.ID, p.Address, req, &resp)
			answers <- err == nil && resp.Success && resp.Term == term
		}()
	}
	for range peers {
		if <-answers {
			acks++
		}
		if acks >= need {
			return n.confirmTerm(term)
		}
	}
	return n.notLeader()
}

// confirmTerm checks that raft still reports this member leader of term.
func (n *Node) confirmTerm(term uint64) error {
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return n.notLeader()
	}
	return nil
}
