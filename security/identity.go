package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
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
	// NodeURIPrefix starts the URI SAN of a streaming node's certificate:
	// spiffe://coordd/node/<N> grants the node role bound to node identity
	// N (a positive decimal integer), so the holder may speak for the
	// sessions it registers and for no other node.
	NodeURIPrefix = "spiffe://coordd/node/"
)

// NodeURI is the URI SAN naming node identity id.
func NodeURI(id uint64) string { return NodeURIPrefix + strconv.FormatUint(id, 10) }

// CertNode returns the node identity a certificate is bound to through a
// NodeURIPrefix URI SAN, 0 when it has none, or an error for a malformed
// or repeated one (a certificate names at most one node).
func CertNode(cert *x509.Certificate) (uint64, error) {
	if cert == nil {
		return 0, nil
	}
	var id uint64
	for _, u := range cert.URIs {
		s, ok := strings.CutPrefix(u.String(), NodeURIPrefix)
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != s {
			return 0, fmt.Errorf("certificate URI %q: the node identity must be a positive decimal integer", u)
		}
		if id != 0 {
			return 0, fmt.Errorf("certificate names two node identities (%d and %d)", id, n)
		}
		id = n
	}
	return id, nil
}

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
// RoleURIPrefix URI SAN ("read", "proxy", "node" or "admin"), or "". A
// certificate with two role URIs is refused, as one with two node
// identities is (CertNode): which of them it grants would depend on their
// order, so it grants neither.
func CertRole(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", nil
	}
	role, found := "", false
	for _, u := range cert.URIs {
		r, ok := strings.CutPrefix(u.String(), RoleURIPrefix)
		if !ok {
			continue
		}
		if found {
			return "", fmt.Errorf("certificate names two roles (%q and %q)", role, r)
		}
		role, found = r, true
	}
	return role, nil
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
