// Package channels is the leader's service for the Channels API's writes:
// PChannels (docs/semantics.md#pchannels), streaming-node drain
// (docs/semantics.md#streaming-nodes), VChannels
// (docs/semantics.md#vchannels), manual rebalance rounds
// (docs/semantics.md#pchannel-assignment) and the replication
// configuration (docs/semantics.md#replication-configuration).
//
// Each use case takes a request checked once, at the API edge, by its
// constructor (NewAddPChannels, NewDrain, NewReplicateConfig, ...): a
// constructor returns the checked type or an error matching
// commands.ErrInvalid, so a service method never sees a malformed request.
// The decisions a request needs before anything is proposed (is the
// configuration already installed, is this cluster a secondary, may this
// cluster take it) are made here on the newest applied state; the FSM runs
// its guards again in Apply, so a decision made on a stale state is safe.
// The service keeps no memory of its own: the balancer and the broadcaster
// it hands work to own theirs.
package channels
