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
//
// The rules a client applies too (channel names, limits, the shape of a
// broadcast, an ack or an abandon) live in package vocab, which knows no
// log schema; Validate calls them and marks their refusals ErrInvalid, so
// the server and the SDK apply one rule set.
package commands
