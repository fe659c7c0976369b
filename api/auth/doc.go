// Package auth authenticates and authorises every call to coordd's gRPC and
// HTTP ports (docs/security.md).
//
// A caller is identified by a bearer token ("authorization: Bearer cdt_..."
// in gRPC metadata or the HTTP Authorization header), checked against the
// SHA-256 hashes in the replicated token table, or by a client certificate
// that names a streaming node (security.NodeURIPrefix) or carries a role
// (security.RoleURIPrefix), or — for coordd servers calling each other —
// by the server certificate. The roles are read < proxy < admin and
// proxy < node (Role.Includes): a node credential is bound to one node
// identity (Identity.Node) and is the only one that may call the methods
// that speak for a streaming node session; SpeaksFor checks the session's
// binding. One table maps every gRPC method and one every HTTP route to the
// role it needs; a method without a row needs admin (fail closed), and a
// test walks every registered method and route so a new one without a row
// fails it.
//
// A follower that forwards a call to the leader passes the caller's role
// and node identity in metadata (MDCallerRole, MDCallerNode); the leader
// honours them only from a peer that presented the server certificate and
// ignores them from anyone else, so forwarding never elevates a caller or
// lets it claim a node.
package auth
