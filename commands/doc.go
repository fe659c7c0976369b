// Package commands owns the replicated log schema: the typed, versioned
// commands that are the only way coordd's state changes.
//
// Compatibility rules (the log outlives any binary that wrote it):
//   - A Type number, once released, is never renumbered or reused.
//   - Body messages only gain fields; a field number is never reused.
//   - A command whose Type has the Ignorable bit may be skipped by a replica
//     that does not know it; any other unknown type, or a version newer than
//     the replica understands, stops the replica, because continuing would
//     let replicas diverge.
//
// No other package marshals log entries: Encode and Decode here are the one
// codec, and both enforce MaxEntryBytes.
package commands
