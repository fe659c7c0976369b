// Package datapath is the single service for the data path's requests
// (docs/semantics.md#segments): what a streaming node's flusher, an import
// job and the Milvus coordinator ask of coordd — segment allocation and
// time ticks, binlog saves, channel checkpoints, Flush and FlushAll, flush
// tasks, import segments, and streaming-node sessions (register,
// heartbeat, drain, deregister).
//
// A request enters as a checked type built once from its coordpb message
// (NewSave, NewCheckpoints, …): a constructor either returns a value the
// service takes as is or an error of the class ErrInvalid. The gRPC
// handlers only convert, forward to the leader, call the Service and map
// its result; every decision that reads the replicated state is made here,
// through the narrow Leader interface, so the service is tested with a
// fake leader (controller/controllertest).
//
// The service composes the leader's controllers rather than owning
// memory of its own: allocations and ticks are the flush manager's
// (controller/flush), sessions' liveness the node-health tracker's, the
// FlushAll message the broadcaster's, and the manifest revision check the
// manifest committer's. The one piece of memory it keeps is the set of
// VChannels a flush waiter needs checkpoints of (wants.go). Who may speak
// for a streaming node (docs/security.md#per-node-identity) is the API's
// rule; the service takes the caller's check where a rule of its own
// decides whether the check applies (EndSession).
package datapath
