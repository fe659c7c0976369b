package jepsen

// Every scenario runs secure (TLS, mutual TLS on raft, a token per client
// role, certificates for the streaming nodes: harness/security.go) unless
// it says Insecure (the explicit insecure variants: smoke-broken-client-3
// and the proc-3-insecure template) or JEPSEN_INSECURE=1 is set. A
// scenario that cannot work secure yet names the defect in
// SecureBlocked, runs insecure, and says so in its log and verdict line
// (none does now: the write path, once blocked by the streaming node's
// data-path client ignoring its TLS settings and token, runs secure).
