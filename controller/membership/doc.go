// Package membership is the leader's service for raft membership changes
// (docs/operations.md#adding-and-removing-members): adding a voter, removing a member,
// handing leadership over, and a member registering its client-facing
// addresses.
//
// Raft's configuration (who is a member, with what suffrage) is the
// truth for who may vote; the FSM keeps only the address directory
// (UpsertMember, RemoveMember). The service decides whether a change may
// be made on the configuration as raft reports it, then orders the two
// so a member raft knows about is always in the directory: addresses are
// recorded before a voter is added, and forgotten after it is removed.
// Requests are checked once, at the API edge, by NewJoin, NewRegistration,
// NewRemoval and NewTransfer.
package membership
