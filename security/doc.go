// Package security holds coordd's transport-security building blocks: the
// certificate identities that tell a coordd server from a client, the TLS
// configurations of every port (gRPC, HTTP, and the mutually authenticated
// raft port), and a throwaway certificate authority for `coordd dev
// --secure` and tests. docs/security.md describes the layout and the
// threat model; package api/auth does authorisation.
//
// The one rule that matters most: a certificate signed by the cluster's CA
// is not enough to speak raft. The raft port also demands the server
// identity (URI SAN ServerURI), which client certificates never carry, so a
// client certificate leaked from a proxy or a streaming node cannot join or
// disrupt the consensus group.
//
// A streaming node's certificate names its node identity (URI SAN
// NodeURIPrefix+N, CA.IssueNode; CertNode reads it): package api/auth lets
// it speak only for the streaming node sessions it registered.
package security
