package raftnode

import (
	"time"

	"github.com/hashicorp/raft"
)

// FirstLogIndex exposes the first index still in the log store, so tests can
// prove that log compaction forced an InstallSnapshot.
func (n *Node) FirstLogIndex() (uint64, error) { return n.logStore.FirstIndex() }

// ClassifyApplyError exposes how a raft Apply error is reported to a
// proposer, for the table test of its outcome classes.
func (n *Node) ClassifyApplyError(err error) error { return n.classifyApplyError(err) }

// LeaseEnd is when this node's leader lease of its established term runs
// out by its own clock (the zero time: it holds none).
func (n *Node) LeaseEnd() time.Time {
	now := time.Now()
	if left := n.lease.remaining(n.establishedTerm.Load(), n.lease.now()); left > 0 {
		return now.Add(left)
	}
	return time.Time{}
}

// HeldRaftRPCs is how many raft RPCs (or answers) fault injection holds
// on this node right now.
func (n *Node) HeldRaftRPCs() int64 {
	if n.watch.faults == nil {
		return 0
	}
	return n.watch.faults.holding.Load()
}

// LogStoreForTest is the member's log store, beneath raft's wrappers.
func (n *Node) LogStoreForTest() raft.LogStore { return n.logStore }

// MeasureState measures the state's size now, synchronously, after any
// background measurement in progress (the memory guard's tests).
func (n *Node) MeasureState() {
	for !n.gauge.measuring.CompareAndSwap(false, true) {
		time.Sleep(time.Millisecond)
	}
	defer n.gauge.measuring.Store(false)
	n.gauge.measure()
}
