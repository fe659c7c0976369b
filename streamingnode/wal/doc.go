// Package wal is the reference streaming node's write-ahead log: one durable,
// term-fenced, append-only log per PChannel in a directory that every
// streaming node process shares (standing in for Kafka, Pulsar or object
// storage).
//
// Layout, per PChannel under the shared directory:
//
//	<dir>/<pchannel>/lock   flock(2) target; every Open and Append holds it exclusively,
//	                        readers hold it shared while they read
//	<dir>/<pchannel>/fence  the highest term ever opened, as decimal text; replaced
//	                        atomically (temp file, fsync, rename, fsync dir)
//	<dir>/<pchannel>/log    records, back to back
//
// A record is an 8-byte header (little-endian uint32 body length, uint32
// CRC-32C of the body) and a body: version byte (1), term int64, offset
// uint64, timestamp uint64, ID uint64 (a broadcast ID, or on a DML message
// an Insert's dedup ID), vchannel length uint16, vchannel bytes, payload
// bytes. TestRecordEncodingIsPinned pins these bytes: logs written by any
// earlier version must keep opening.
//
// Fencing: Open(pchannel, term) refuses a term below the fence and raises
// the fence to term. Every Append re-reads the fence under the exclusive lock
// and refuses (ErrFenced) when it is above the writer's term, so a process
// that still believes it owns a PChannel cannot write once a newer term has
// been opened anywhere, and nothing it tries to write is ever readable.
//
// Group commit: concurrent appends to one PChannel share one write and one
// fdatasync. Enqueue fixes a record's place in the log; the callers then
// take turns leading (see group.go): the leader writes everything queued
// and answers each caller only after the fdatasync that covers its record.
// The fence is checked once per batch under the exclusive flock it is
// written under, so a fenced writer's batch writes nothing.
//
// Offsets are dense per PChannel, starting at 0. Timestamps strictly increase
// along the log. An append with a non-zero ID is idempotent per (key space,
// ID, vchannel): a repeat returns the first record's ID. The key space is
// the payload's (dedup.go): DML messages dedup only among DML messages
// (an Insert's dedup ID), everything else only among broadcasts, so a
// writer's dedup ID never meets a broadcast ID.
//
// Recovery: a record cut short at the end of the log (a writer died mid-write)
// or a final record whose checksum fails and which contains an all-zero
// 512-byte sector (a machine crash before the data reached the disk) is a
// torn tail: the next Open or Append truncates it. Any other damage is
// ErrCorrupt.
//
// The package is pure Go and relies on flock(2), so it is meant for Unix
// systems; the shared directory must be on a local file system (flock over
// NFS is not reliable).
package wal
