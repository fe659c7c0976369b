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
// The node is also both halves of the data path
// (docs/semantics.md#flusher-and-recovery): Insert asks coordd for room in a growing segment
// and appends an insert message naming it (package dml), and the flusher
// (package flusher) turns each held PChannel's inserts into binlogs in the
// object store (Config.ObjectStore) and reports them to coordd.
//
// Shutdown is controlled: RequestDrain, wait until coordd has moved every
// channel away, Deregister, stop serving, close the WALs.
package streamingnode
