package raftnode

import (
	"context"
	"fmt"
	"sync"
)

// verifier coalesces leadership checks: callers that arrive while a quorum
// round is in flight share the next round. Every caller is answered by a
// round that started after it arrived, which is what makes a read (or an
// allocation from leader memory) linearizable: if the round succeeds, no
// other leader can have been elected before the caller arrived.
type verifier struct {
	n       *Node
	mu      sync.Mutex
	waiting []chan error
	running bool
}

// VerifyLeader confirms with a quorum that this node is still the leader.
func (n *Node) VerifyLeader(ctx context.Context) error {
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
		if e := v.n.raft.VerifyLeader().Error(); e != nil {
			err = v.n.notLeader()
		}
		for _, ch := range batch {
			ch <- err
		}
	}
}
