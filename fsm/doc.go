// Package fsm owns coordd's replicated state and the only code that changes
// it.
//
// The state machine is pure and deterministic. (*State).Apply reads nothing
// but the log entry and the current state: no clock (time arrives as the
// leader-stamped ProposedAtUnixMs), no randomness, no I/O, no goroutines, no
// locks, and no map-iteration order that can leak into state or output.
// purity_test.go makes this rule executable. Two replicas that apply the same
// entries therefore hold identical states, and WriteSnapshot produces
// identical bytes for them.
//
// A State is immutable once published: Apply returns a new *State that shares
// structure with the old one (persistent maps from benbjohnson/immutable), so
// a point-in-time view for a snapshot or a read is a pointer copy, and a
// snapshot never blocks Apply.
//
// Apply has two failure classes. A request that is wrong for the current
// state is a typed Rejection in its Result, identical on every replica. An
// entry that cannot be decoded, or whose type this binary does not know and
// may not skip, is returned as an error; the caller must stop the replica,
// because a replica that continued would diverge.
//
// Invariants (checked by CheckInvariants in tests):
//   - AppliedIndex only grows.
//   - The TSO window limit and the next global ID only grow.
//   - The established leader term only grows.
//   - The request-ID table holds at most MaxDedupEntries entries, and the
//     sequence order matches the order entries were recorded.
//   - A VChannel checkpoint other than the dropped sentinel belongs to a
//     live VChannel (the checkpoint apply relies on it; also checked when
//     a snapshot is restored).
package fsm
