package jepsen

// Every scenario runs secure (TLS, mutual TLS on raft, a token per client
// role, certificates for the streaming nodes: harness/security.go) unless
// it says Insecure (the explicit insecure variants: smoke-broken-client-3
// and the proc-3-insecure template) or JEPSEN_INSECURE=1 is set. A
// scenario that cannot work secure yet names the defect in
// SecureBlocked, runs insecure, and says so in its log and verdict line.

// blockedD2 keeps the write path insecure: the streaming node's data-path
// client (inserts' segment allocation, the flusher's reports) dials coordd
// without the node's TLS settings and credential, so in a secure cluster
// no insert or flush can work. Drop it from the scenarios once fixed.
const blockedD2 = "D2: the streaming node's data-path client ignores --tls-*/--token-file, so inserts and flushes fail on a secure cluster"
