// Package client is the Go SDK for coordd's public gRPC API
// (api/proto/coordd/v1/coordd.proto, generated code in api/coordpb).
//
// It owns three things and nothing else:
//
//   - Connections: one grpc.ClientConn per endpoint (plaintext; coordd
//     serves loopback only), created lazily by grpc and kept until Close.
//     Endpoints learned from leader hints join the pool.
//   - Routing and retries: a call starts at the endpoint that answered last
//     and walks the list in order. An Unavailable answer (or a connection
//     that cannot be made within DialTimeout) moves to the next endpoint, or
//     straight to the leader when the server names it in the
//     coordd-leader-grpc metadata. Once every endpoint was tried the client
//     backs off exponentially (20 ms doubling to 500 ms). The whole call,
//     retries included, is bounded by the caller's context deadline and by
//     Config.RequestTimeout, whichever ends first.
//   - Typed methods, one per RPC of the Cluster and Allocator services.
//
// Which errors are retried:
//
//   - Definitive answers (InvalidArgument, NotFound, FailedPrecondition,
//     AlreadyExists, Aborted, ResourceExhausted, and every other code except
//     the two below) are returned at once.
//   - Unavailable is retried. When its trailer carries "coordd-outcome:
//     unknown" (the write may or may not have been committed), reads and
//     allocations are still retried (a retried allocation only skips
//     values), but the membership changes AddVoter, RemoveMember and
//     TransferLeader are retried at most Config.OutcomeUnknownRetries times
//     (TransferLeader without a target never, since a second transfer would
//     move leadership again). DeadlineExceeded from a single attempt while
//     the call's own deadline has not passed counts the same way.
//   - A connection that breaks after the request was sent looks like any
//     other Unavailable; the client retries it.
//
// Every failure is returned as *Error, which names the operation, the last
// endpoint, the number of attempts and whether an outcome was unknown, and
// which carries the last gRPC status (status.Code and status.Convert see
// it).
//
// A Client is safe for concurrent use.
package client
