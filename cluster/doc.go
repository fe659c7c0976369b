// Package cluster owns how a coordd member comes to be part of a cluster:
//
//  1. Bootstrap: every member of a new cluster is started with the same
//     static --peers list. A member with no raft state on disk bootstraps
//     with that list (raft accepts identical bootstraps from every member);
//     a member that already has state never bootstraps again, so restarts
//     are safe with the same flags.
//  2. Join: a member started with --join (any member's gRPC address) and no
//     state asks the cluster to add it as a voter; the call is forwarded to
//     the leader, which records the member's addresses and adds it.
//  3. Registration: once a leader is known, every member makes sure the FSM
//     records its current gRPC and HTTP addresses, so any node can describe
//     the cluster and forward requests to the leader.
//
// It also holds the local launcher behind `coordd dev`.
package cluster
