// Package auth authenticates and authorises every call to coordd's gRPC and
// HTTP ports (docs/security.md).
//
// A caller is identified by a bearer token ("authorization: Bearer cdt_..."
// in gRPC metadata or the HTTP Authorization header), checked against the
// SHA-256 hashes in the replicated token table, or by a client certificate
// that carries a role (security.RoleURIPrefix), or — for coordd servers
// calling each other — by the server certificate. Roles are ordered:
// read < node < admin; a caller may use every method whose role is at or
// below its own. One table maps every gRPC method and one every HTTP route
// to the role it needs; a method without a row needs admin (fail closed),
// and a test walks every registered method and route so a new one without
// a row fails it.
//
// A follower that forwards a call to the leader passes the caller's role
// in metadata (MDCallerRole); the leader honours it only from a peer that
// presented the server certificate, and it can only lower that peer's own
// (admin) role, so forwarding never elevates a caller.
package auth
