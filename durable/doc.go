// Package durable owns the one system call coordd's logs make to put
// written bytes on disk without touching the file's timestamps
// (fdatasync), for the streaming node's WAL and the raft log's reach
// record, which both overwrite or append in place and fsync per batch.
package durable
