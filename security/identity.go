package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

const (
	// ServerURI is the URI SAN every coordd server certificate carries and
	// no client certificate may: the raft port and the "server" identity
	// on the API ports require it.
	ServerURI = "spiffe://coordd/server"
	// ServerName is the DNS SAN of every server certificate; clients verify
	// servers against it (whatever address they dialled) unless told
	// another name.
	ServerName = "server.coordd"
	// RoleURIPrefix starts the URI SAN of a client certificate that grants
	// a role by itself: spiffe://coordd/role/read|node|admin.
	RoleURIPrefix = "spiffe://coordd/role/"
	// ClientURIPrefix starts the URI SAN of a client certificate that only
	// identifies its holder (the role then comes from a bearer token).
	ClientURIPrefix = "spiffe://coordd/client/"
)

// ErrNotServer is returned when a peer's certificate lacks the server
// identity.
var ErrNotServer = errors.New("peer certificate does not carry the coordd server identity " + ServerURI)

// IsServerCert reports whether cert carries the server identity.
func IsServerCert(cert *x509.Certificate) bool {
	if cert == nil {
		return false
	}
	for _, u := range cert.URIs {
		if u.String() == ServerURI {
			return true
		}
	}
	return false
}

// CertRole returns the role a client certificate grants through a
// RoleURIPrefix URI SAN ("read", "node" or "admin"), or "".
func CertRole(cert *x509.Certificate) string {
	if cert == nil {
		return ""
	}
	for _, u := range cert.URIs {
		if r, ok := strings.CutPrefix(u.String(), RoleURIPrefix); ok {
			return r
		}
	}
	return ""
}

// requireServerPeer is a tls.Config.VerifyConnection hook: the chain was
// already verified against the CA; this adds the identity check.
func requireServerPeer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("no peer certificate: %w", ErrNotServer)
	}
	if !IsServerCert(cs.PeerCertificates[0]) {
		leaf := cs.PeerCertificates[0]
		return fmt.Errorf("certificate %q (URIs %v): %w", leaf.Subject.CommonName, leaf.URIs, ErrNotServer)
	}
	return nil
}
