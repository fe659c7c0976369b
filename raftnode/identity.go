package raftnode

import "github.com/coordd/coordd/raftnode/datadir"

// Identity returns this member's durable identity.
func (n *Node) Identity() datadir.Identity { return n.storage.Identity() }

// ClusterID is the ID of the cluster this member belongs to, or "" before
// it has bootstrapped or joined.
func (n *Node) ClusterID() string { return n.storage.Identity().ClusterID }

// SetClusterID durably records the cluster this member bootstraps or joins,
// before it accepts raft traffic from that cluster. A member that already
// belongs to another cluster refuses.
func (n *Node) SetClusterID(clusterID string) error { return n.storage.SetClusterID(clusterID) }

// DataDir is the member's data directory.
func (n *Node) DataDir() string { return n.cfg.DataDir }

// LogStore is the log store this member's data dir keeps its raft log in
// (LogStoreWAL or LogStoreBolt): the one it records, or the one chosen when
// it was created.
func (n *Node) LogStore() string { return n.storage.LogStore() }
