// Package client is the Go SDK for coordd's public gRPC API
// (api/proto/coordd/v1/*.proto, generated code in api/coordpb). How coordd
// answers, and which errors mean what, is in docs/architecture.md#forwarding
// and docs/semantics.md#error-classes.
//
// It owns five things and nothing else:
//
//   - Connections: one grpc.ClientConn per endpoint, created lazily by
//     grpc and kept until Close, over TLS when Config.TLS is set (LoadTLS
//     builds it from a CA and, for mutual TLS, a client certificate) and
//     plaintext otherwise (members started with --insecure). Config.Token
//     is sent as a bearer token with every call and needs TLS: New refuses
//     a token over plaintext (docs/security.md#credentials). Endpoints
//     learned from leader hints join the pool.
//   - Routing and retries: a call starts at the endpoint that answered last
//     and walks the list in order. An Unavailable answer (or a connection
//     that cannot be made within DialTimeout) moves to the next endpoint, or
//     straight to the leader when the server names it in the
//     coordd-leader-grpc metadata. Once every endpoint was tried the client
//     backs off exponentially (20 ms doubling to 500 ms). The whole call,
//     retries included, is bounded by the caller's context deadline and by
//     Config.RequestTimeout, whichever ends first.
//   - Typed methods for the Cluster, Allocator, Channels, Broadcaster,
//     DataCoord, manifest and token services (Status, AllocTimestamp,
//     AllocVirtualChannels, Broadcast, SaveBinlogPaths,
//     CommitSegmentManifest, CreateToken, ...; DrainNode with drain=false
//     undrains), plus helpers built on them: Snapshot and SaveSnapshot
//     stream a consistent snapshot from the leader (SaveSnapshot with the
//     backup header `coordctl snapshot save` writes), and WaitFlushed polls
//     GetFlushState until a flush is done. Where it can, the SDK checks a write's arguments locally with
//     the server's own rules (package vocab), so bad input fails without a
//     round trip. The
//     StreamingNodeRegistry service is for streaming nodes and is not
//     wrapped here.
//   - Streams that survive failover: NewWatcher follows the versioned
//     assignment stream (WatchAssignments), reconnecting to any member and
//     accepting only strictly newer versions; WatchFlushTasks follows one
//     streaming node's flush tasks the same way.
//   - The replay filter a restarted flusher needs (docs/semantics.md#recovery):
//     EarliestSeek picks where to start reading the WAL from the recovery
//     infos of its VChannels, and a ReplayFilter per VChannel drops what
//     was already flushed, so rows are neither lost nor duplicated.
//
// Writes that the server deduplicates by request ID (Broadcast,
// AllocVirtualChannels, DropVirtualChannels, SaveBinlogPaths, ...) get a
// random request ID when the caller passes none, made once per call and
// carried by every attempt of it, so the client's own retries are applied
// once (docs/semantics.md#request-id-dedup).
//
// Which errors are retried:
//
//   - Definitive answers (InvalidArgument, NotFound, FailedPrecondition,
//     AlreadyExists, Aborted, and every other code except the ones below)
//     are returned at once. So is a ResourceExhausted without a retry hint
//     (e.g. a message over the size limit).
//   - ResourceExhausted with the trailer "coordd-retry-after-ms" (the
//     leader's proposal queue was full; nothing was done) is retried, for
//     every kind of call, after at least the hinted wait and with the same
//     exponential backoff, until the call's deadline or retry budget runs
//     out: a wait that would outlast the deadline is not started.
//   - Unavailable is retried. When its trailer carries "coordd-outcome:
//     unknown" (the write may or may not have been committed), reads,
//     allocations and idempotent writes (request-ID-deduplicated calls,
//     broadcasts with an idempotency key, AddPChannels, DrainNode, ...) are
//     still retried (a retried allocation only skips values). Writes whose
//     repeat changes nothing more but may answer as if the first had not
//     happened — AddVoter, RemoveMember, TransferLeader to a target,
//     RevokeToken, AbandonBroadcast, FlushAll — are resent at most
//     Config.OutcomeUnknownRetries times. Writes that a resend would do
//     twice and that carry no request ID — CreateToken, TransferLeader
//     without a target, ResetReplicateRole — are never resent after an
//     unknown outcome (docs/semantics.md#client-retries).
//     DeadlineExceeded from a single attempt while the call's own deadline
//     has not passed counts the same way. Broadcast and FlushAll wait on
//     server-side work, so one attempt may use the whole call deadline.
//   - An Unavailable the server marked "coordd-outcome: none" (not the
//     leader, not caught up: nothing was done) is retried like any read.
//     An Unavailable that no server marked, from a call that had left the
//     client (its connection broke under it, or a forwarded call lost the
//     leader), counts as an unknown outcome: the request may have been
//     delivered and applied. A call that never reached a connection (the
//     endpoint was down) is retried freely. Once any attempt's outcome was
//     unknown, the call's final error says so (IsOutcomeUnknown), whatever
//     the last attempt answered.
//
// Every failure is returned as *Error, which names the operation, the last
// endpoint, the number of attempts and whether an outcome was unknown, and
// which carries the last gRPC status (status.Code and status.Convert see
// it).
//
// A Client is safe for concurrent use.
package client
