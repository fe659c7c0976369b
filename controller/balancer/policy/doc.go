// Package policy owns the channel balance policies of coordd's channel
// manager: given one balance round's view of the cluster (every PChannel with
// its VChannels' collections, its current healthy placement and last assign
// time, the healthy streaming nodes and the leader's clock) a Policy returns
// the full expected assignment of every PChannel to a node. It implements
// Milvus's vchannelFair policy (docs/semantics.md#balance-policy) and a
// small registry so the policy is selected by name (Milvus's
// streaming.walBalancer.balancePolicy.name).
//
// The package decides placements only. Turning an expected assignment into
// terms, ASSIGNING/ASSIGNED transitions and RPCs belongs to the caller
// (docs/semantics.md#pchannel-assignment).
//
// Determinism rule: a policy is a pure function of its Config and the Layout
// it is given. It reads no clock (time comes in Layout.NowMs), starts no
// goroutines, uses no randomness and does no I/O. Inputs are canonicalised
// first (channels sorted by name, nodes sorted by ID and de-duplicated), every
// loop that decides anything walks those sorted orders, no decision ever
// depends on map iteration order, and every tie is broken explicitly (smaller
// node ID, then smaller channel name, then the first candidate in DFS order).
// Floating-point products are rounded explicitly so the compiler cannot fuse
// them into FMA instructions, and candidate scores closer than a relative
// 1e-12 count as ties, so rounding noise never overrides those tie-breaks;
// a rebalance is accepted only if the winner, rescored from scratch, beats
// the current layout by more than the tolerance. The same Config and the same Layout, in any
// order of Channels and Nodes, therefore always produce the same assignment.
package policy
