package raftnode

// FirstLogIndex exposes the first index still in the log store, so tests can
// prove that log compaction forced an InstallSnapshot.
func (n *Node) FirstLogIndex() (uint64, error) { return n.store.FirstIndex() }
