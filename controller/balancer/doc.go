// Package balancer is the leader-only controller that keeps every PChannel
// assigned to exactly one healthy streaming node
// (docs/semantics.md#pchannel-assignment).
//
// A round reads the FSM and the node tracker, asks the policy (a pure
// function of the layout) for the expected assignment, and applies the
// difference in two phases:
//
//  1. Commit AssignPChannels: each changed channel's term is bumped and the
//     target recorded (ASSIGNING) before any RPC. The command carries the
//     term the decision was based on, so a decision made on a stale view,
//     or by a deposed leader, is rejected by the FSM.
//  2. Per channel: Remove on every history node, Assign(pchannel, term) on
//     the target — both carrying the leader's raft term as a fence — then
//     commit AssignPChannelsDone for that exact term.
//
// A channel whose RPCs fail stays ASSIGNING with the reason recorded
// (RecordAssignFailure); the next round, after a backoff, reassigns it with
// term+1. Rounds are triggered by state changes (nodes, vchannel counts),
// node health changes, a periodic timer and manual requests.
//
// Every applied entry wakes Run, but most (manifest commits, allocations,
// broadcasts) touch no channel record. After a round that changed nothing,
// Run decides again on a state wake only if the channel records
// (fsm.ChannelRecords: PChannels, streaming nodes, collections) are no
// longer those that round decided on: the plan's signature is a function
// of those records and of health, and health has its own notification.
package balancer
