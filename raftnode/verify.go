package raftnode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// verifier coalesces leadership checks: callers that arrive while a quorum
// round is in flight share the next round. Every caller is answered by a
// round that started after it arrived, which is what makes a read (or an
// allocation from leader memory) linearizable: if the round succeeds, no
// other leader can have been elected before the caller arrived.
//
// A round (quorumRound) counts only answers to heartbeats it sent itself,
// after it began.
type verifier struct {
	n       *Node
	mu      sync.Mutex
	waiting []chan error
	running bool
	// rounds and leased count the quorum rounds run and the calls the
	// lease answered.
	rounds, leased atomic.Uint64
}

// VerifyLeader confirms that this node is still the leader: no other
// leader can have been elected before the call. Inside a leader lease
// (Config.LeaderLease) it answers from the clock; otherwise it waits for a
// quorum round that started after the call.
func (n *Node) VerifyLeader(ctx context.Context) error {
	if n.lease.enabled() {
		term := n.establishedTerm.Load()
		now := n.lease.now()
		left, renew := n.lease.check(term, now)
		if renew {
			go n.renewLease(term)
		}
		if left > 0 && n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term {
			n.verify.leased.Add(1)
			return nil
		}
	}
	ch := make(chan error, 1)
	v := &n.verify
	v.mu.Lock()
	v.waiting = append(v.waiting, ch)
	if !v.running {
		v.running = true
		go v.loop()
	}
	v.mu.Unlock()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("verify leadership: %w", ctx.Err())
	case <-n.closed:
		return ErrShuttingDown
	}
}

// loop runs rounds until nobody is waiting.
func (v *verifier) loop() {
	for {
		v.mu.Lock()
		batch := v.waiting
		v.waiting = nil
		if len(batch) == 0 {
			v.running = false
			v.mu.Unlock()
			return
		}
		v.mu.Unlock()
		var err error
		v.rounds.Add(1)
		err = v.n.quorumRound()
		for _, ch := range batch {
			ch <- err
		}
	}
}

// renewLease commits a barrier entry of term: its commit extends the lease
// exactly as a command's does. Allocations and reads change nothing in the
// log, so without it a leader serving only them would lose its lease.
func (n *Node) renewLease(term uint64) {
	defer n.lease.renewalDone()
	anchor := n.lease.now()
	if err := n.raft.Barrier(n.cfg.ApplyTimeout).Error(); err != nil {
		return
	}
	if n.raft.CurrentTerm() == term && n.establishedTerm.Load() == term {
		n.lease.extend(term, anchor)
	}
}

// VerifyStats reports how many leadership checks ran a quorum round and
// how many the lease answered.
func (n *Node) VerifyStats() (rounds, leased uint64) {
	return n.verify.rounds.Load(), n.verify.leased.Load()
}
