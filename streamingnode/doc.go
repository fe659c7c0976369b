// Package streamingnode is the reference streaming node shipped with coordd.
//
// A node registers with coordd (StreamingNodeRegistry), heartbeats, follows
// the assignment stream (Channels.WatchAssignments) and serves
// StreamingNodeService: coordd opens and closes PChannel WALs on it with
// Assign and Remove (fenced by coordd's raft term and the PChannel term),
// clients Append to the WALs it holds and Read any PChannel. The WALs live in
// a directory shared by every node (package wal), where the term fence is
// recorded durably, so a node that lost a channel cannot write to it even if
// it has not heard so yet.
//
// Shutdown is controlled: RequestDrain, wait until coordd has moved every
// channel away, Deregister, stop serving, close the WALs.
package streamingnode
