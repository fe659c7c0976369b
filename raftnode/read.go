package raftnode

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm"
)

// LinearizableRead returns a state that reflects every write acknowledged
// before the call began (the ReadIndex recipe): note the commit index,
// confirm leadership with a quorum round, check the term did not change,
// then wait until this node has applied that index. Only a leader that has
// committed an entry of its own term may serve it, because before that its
// commit index may trail what earlier leaders acknowledged.
func (n *Node) LinearizableRead(ctx context.Context) (*fsm.State, error) {
	term := n.establishedTerm.Load()
	if term == 0 {
		if n.IsLeader() {
			return nil, ErrNotEstablished
		}
		return nil, n.notLeader()
	}
	readIndex := n.raft.CommitIndex()
	if err := n.VerifyLeader(ctx); err != nil {
		return nil, err
	}
	if n.raft.CurrentTerm() != term || n.establishedTerm.Load() != term {
		return nil, n.notLeader()
	}
	if err := n.waitDelivered(ctx, readIndex); err != nil {
		return nil, err
	}
	return n.fsm.State(), nil
}

// waitDelivered waits until the FSM has been handed every entry up to
// index. Entries the FSM never sees (a new leader's no-op, barriers) can sit
// at the commit index; when raft reports them applied but the FSM saw no
// later entry, a Barrier flushes the pipeline so the wait cannot hang.
func (n *Node) waitDelivered(ctx context.Context, index uint64) error {
	ch, cancel := n.fsm.waitCh(index)
	defer cancel()
	fallback := time.NewTimer(20 * time.Millisecond)
	defer fallback.Stop()
	for {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("wait for apply of index %d: %w", index, ctx.Err())
		case <-n.closed:
			return ErrShuttingDown
		case <-fallback.C:
			if n.raft.AppliedIndex() >= index {
				if err := n.raft.Barrier(time.Second).Error(); err != nil {
					return n.notLeader()
				}
				return nil
			}
			fallback.Reset(20 * time.Millisecond)
		}
	}
}

// WaitApplied waits until this node's FSM has applied at least index (used
// by followers catching up and by tests).
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	ch, cancel := n.fsm.waitCh(index)
	defer cancel()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for apply of index %d: %w", index, ctx.Err())
	case <-n.closed:
		return ErrShuttingDown
	}
}

// EntryTerm returns the term of the log entry at index, from the log or,
// when the log no longer holds it, from a snapshot taken exactly there.
func (n *Node) EntryTerm(index uint64) (uint64, error) {
	if index == 0 {
		return 0, nil
	}
	var e raft.Log
	if err := n.logStore.GetLog(index, &e); err == nil {
		return e.Term, nil
	}
	if metas, err := n.snaps.List(); err == nil {
		for _, m := range metas {
			if m.Index == index {
				return m.Term, nil
			}
		}
	}
	return 0, fmt.Errorf("the term of entry %d is in neither the log nor a snapshot", index)
}
