package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// The streaming node's port (docs/security.md#the-streaming-nodes-port).
// A secure streaming node serves TLS with its own certificate, issued by
// the cluster's CA: the node-role certificate it already presents to
// coordd. That certificate names the node by URI SAN, not by host name, so
// its callers verify the chain against the CA and the streaming-node
// identity in the leaf (a SPIFFE-style check) instead of a DNS name. The
// node verifies a client certificate when one is offered; its lifecycle
// calls (Assign, Remove) and coordinator appends require the coordd server
// identity (IsServerCert), which only coordd members hold.

// ErrNotStreamingNode is returned when a peer's certificate does not
// carry a streaming node's identity.
var ErrNotStreamingNode = errors.New("peer certificate does not carry a streaming node identity (the node role " +
	RoleURIPrefix + "node or a node URI " + NodeURIPrefix + "<N>)")

// IsStreamingNodeCert reports whether cert identifies a streaming node: it
// names a node identity (NodeURI, CA.IssueNode) or grants the node role by
// URI SAN, and does not carry the server identity.
func IsStreamingNodeCert(cert *x509.Certificate) bool {
	if cert == nil || IsServerCert(cert) {
		return false
	}
	if id, err := CertNode(cert); err == nil && id != 0 {
		return true
	}
	role, err := CertRole(cert)
	return err == nil && role == "node"
}

// StreamingNodeServer is a secure streaming node's port: the node's own
// certificate; a client certificate is verified when offered (coordd
// presents its server certificate, writers a proxy certificate:
// CheckDataPathWriter) but not required by the handshake, since Read and
// Status are open to any TLS client.
func (m *Material) StreamingNodeServer() (*tls.Config, error) {
	if m.cert == nil {
		return nil, errors.New("a secure streaming node serves TLS with its own certificate: give --tls-cert and --tls-key (a node certificate from the cluster's CA)")
	}
	leaf, err := x509.ParseCertificate(m.cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse the node certificate: %w", err)
	}
	if !IsStreamingNodeCert(leaf) {
		return nil, fmt.Errorf("certificate %q (URIs %v): %w", leaf.Subject.CommonName, leaf.URIs, ErrNotStreamingNode)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: m.certs(), ClientCAs: m.pool,
		ClientAuth: tls.VerifyClientCertIfGiven, NextProtos: []string{"h2"}}, nil
}

// StreamingNodeClient derives, from a client TLS configuration for
// coordd's API ports (its CA pool and, for coordd itself, the server
// certificate it presents), the configuration for dialling a streaming
// node: the node's chain is verified against the same CA, and its leaf
// must carry a streaming node identity (IsStreamingNodeCert) rather than a
// host name. nil stays nil (plaintext).
func StreamingNodeClient(base *tls.Config) *tls.Config {
	if base == nil {
		return nil
	}
	c := base.Clone()
	roots := base.RootCAs
	// The standard name check is replaced by VerifyConnection below, which
	// verifies the chain itself: the node's certificate names no host.
	c.InsecureSkipVerify = true
	c.ServerName = ""
	c.VerifyConnection = func(cs tls.ConnectionState) error { return verifyStreamingNode(cs, roots) }
	return c
}

// verifyStreamingNode checks a streaming node's certificate chain against
// roots (nil: the system pool) and the streaming-node identity of its leaf.
func verifyStreamingNode(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("streaming node presented no certificate: %w", ErrNotStreamingNode)
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("streaming node certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if !IsStreamingNodeCert(leaf) {
		return fmt.Errorf("certificate %q (URIs %v): %w", leaf.Subject.CommonName, leaf.URIs, ErrNotStreamingNode)
	}
	return nil
}

// ErrWrongNode is returned when a streaming node's certificate names
// another node identity than the registration coordd is calling.
var ErrWrongNode = errors.New("streaming node certificate names another node identity")

// CheckNodeIdentity checks, after a call to a streaming node, that the
// certificate it served (the leaf of cs) may speak for a registration
// bound to node identity bound (StreamingNodeRecord.bound_node): a
// certificate naming a node identity must name bound; one that names none
// (the node role alone) cannot be told apart and passes, as does any
// certificate when the registration is not bound (bound 0). A compromised
// node's certificate therefore cannot stand in for another node's session
// at that node's address.
func CheckNodeIdentity(cs tls.ConnectionState, bound uint64) error {
	if bound == 0 || len(cs.PeerCertificates) == 0 {
		return nil
	}
	id, err := CertNode(cs.PeerCertificates[0])
	if err != nil {
		return fmt.Errorf("streaming node certificate: %w", err)
	}
	if id != 0 && id != bound {
		return fmt.Errorf("%w: it names node identity %d, the registration is bound to %d", ErrWrongNode, id, bound)
	}
	return nil
}

// The data path of a secure streaming node's port (Insert, and Append
// without a coordinator term) writes rows other services will flush and
// serve, so it is a proxy's call. The node cannot check coordd's bearer
// tokens (only their hashes live in coordd's state), and it must not be
// handed them: a compromised node, whose own credential speaks for that
// node alone, would otherwise collect the proxy and admin tokens of every
// caller. Writers therefore present a client certificate from the
// cluster's CA, judged exactly as coordd judges one: the coordd server
// identity (coordd's own appends), the proxy or admin role, a legacy
// spiffe://coordd/role/node certificate naming no node (proxy rights, as
// at coordd), or the node's own identity.
var (
	// ErrNoWriterCredential: the caller presented no certificate that
	// grants a role (none, one without a role, or a malformed one).
	// Answered Unauthenticated.
	ErrNoWriterCredential = errors.New("a write to a secure streaming node needs a client certificate from the cluster's CA with the proxy or admin role (" +
		RoleURIPrefix + "proxy); the node takes no bearer tokens")
	// ErrNotWriter: the certificate grants a role that may not write
	// here (read, or another streaming node's identity). Answered
	// PermissionDenied.
	ErrNotWriter = errors.New("the client certificate may not write to this streaming node")
)

// CheckDataPathWriter decides whether leaf, the client certificate a
// caller presented (already verified against the cluster's CA by the TLS
// handshake; nil when none was presented or verified), may write through
// the data path of the streaming node whose own node identity is self (0
// for a legacy node certificate naming none).
func CheckDataPathWriter(leaf *x509.Certificate, self uint64) error {
	if leaf == nil {
		return fmt.Errorf("%w: none was presented", ErrNoWriterCredential)
	}
	if IsServerCert(leaf) {
		return nil
	}
	node, err := CertNode(leaf)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoWriterCredential, err)
	}
	role, err := CertRole(leaf)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoWriterCredential, err)
	}
	if node != 0 {
		switch {
		case role != "" && role != "node":
			return fmt.Errorf("%w: the certificate names node %d and role %q", ErrNoWriterCredential, node, role)
		case node != self:
			return fmt.Errorf("%w: it is streaming node %d's credential, and this is node %d; writers use a proxy certificate",
				ErrNotWriter, node, self)
		}
		return nil
	}
	switch role {
	case "proxy", "admin", "node":
		return nil
	case "read":
		return fmt.Errorf("%w: it has role read; writing rows needs proxy", ErrNotWriter)
	case "":
		return fmt.Errorf("%w: the certificate (URIs %v) carries no role", ErrNoWriterCredential, leaf.URIs)
	}
	return fmt.Errorf("%w: unknown role %q", ErrNoWriterCredential, role)
}

// Reading a secure streaming node's WAL (Read) returns the rows every
// writer appended, so it needs a credential of the cluster too, though any
// role will do: coordd's server identity, any streaming node's identity,
// or a certificate with a known role (read, proxy, node or admin).

// ErrNoReaderCredential: a Read presented no certificate of the cluster
// that names a role or a node. Answered Unauthenticated.
var ErrNoReaderCredential = errors.New("reading a secure streaming node's WAL needs a client certificate from the cluster's CA " +
	"with a role (" + RoleURIPrefix + "read or higher) or a node identity")

// CheckDataPathReader decides whether leaf (verified by the TLS handshake;
// nil when none was presented) may read this node's WAL.
func CheckDataPathReader(leaf *x509.Certificate) error {
	if leaf == nil {
		return fmt.Errorf("%w: none was presented", ErrNoReaderCredential)
	}
	if IsServerCert(leaf) {
		return nil
	}
	node, err := CertNode(leaf)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoReaderCredential, err)
	}
	role, err := CertRole(leaf)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoReaderCredential, err)
	}
	if node != 0 {
		// A node identity reads as that node, unless the certificate also
		// names another role: that is refused here as by coordd
		// (api/auth), not read as whichever of the two comes first.
		if role != "" && role != "node" {
			return fmt.Errorf("%w: the certificate names node %d and role %q", ErrNoReaderCredential, node, role)
		}
		return nil
	}
	switch role {
	case "read", "proxy", "node", "admin":
		return nil
	case "":
		return fmt.Errorf("%w: the certificate (URIs %v) carries no role", ErrNoReaderCredential, leaf.URIs)
	default:
		return fmt.Errorf("%w: unknown role %q", ErrNoReaderCredential, role)
	}
}
