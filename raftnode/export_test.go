package raftnode

// FirstLogIndex exposes the first index still in the log store, so tests can
// prove that log compaction forced an InstallSnapshot.
func (n *Node) FirstLogIndex() (uint64, error) { return n.store.FirstIndex() }

// ClassifyApplyError exposes how a raft Apply error is reported to a
// proposer, for the table test of its outcome classes.
func (n *Node) ClassifyApplyError(err error) error { return n.classifyApplyError(err) }
