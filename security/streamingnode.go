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
	return CertRole(cert) == "node"
}

// StreamingNodeServer is a secure streaming node's port: the node's own
// certificate; a client certificate is verified when offered (coordd
// presents its server certificate) but not required, since the data path
// (Insert, Append, Read, Status) is open to any TLS client.
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
