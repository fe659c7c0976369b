// Package controllertest is the test kit of the leader routines under
// controller/: one fake leader over a real FSM state and one fake clock
// that tests advance instead of sleeping.
//
// The fake leader applies a proposal at once, on the caller's goroutine,
// to a real fsm.State, so every FSM guard runs exactly as on a replica;
// only Raft (replication, election, the log) is left out. Hooks let a
// test fail, delay or interleave proposals.
package controllertest
