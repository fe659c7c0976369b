package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files names the PEM files of one party: the CA that signs the cluster's
// certificates, and this party's certificate and key.
type Files struct {
	CA, Cert, Key string
}

// Material is loaded TLS material: the CA pool and, for a server (or a
// client with mutual TLS), its key pair.
type Material struct {
	pool *x509.CertPool
	cert *tls.Certificate // nil for a client without a certificate
}

// Load reads f. The CA is required; Cert and Key come together or not at all.
func Load(f Files) (*Material, error) {
	if f.CA == "" {
		return nil, errors.New("a CA certificate file is required for TLS")
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("read CA %s: %w", f.CA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", f.CA)
	}
	m := &Material{pool: pool}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("give both a certificate and its key, or neither")
	}
	if f.Cert != "" {
		kp, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("load key pair %s, %s: %w", f.Cert, f.Key, err)
		}
		m.cert = &kp
	}
	return m, nil
}

// LoadServer reads a server's files and checks that its certificate
// carries the server identity (a server started with a client certificate
// would fail every raft connection with a less obvious error).
func LoadServer(f Files) (*Material, error) {
	if f.Cert == "" {
		return nil, errors.New("a server needs a certificate and key")
	}
	m, err := Load(f)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(m.cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", f.Cert, err)
	}
	if !IsServerCert(leaf) {
		return nil, fmt.Errorf("%s: %w (issue it with `coordd dev --secure`'s layout, see docs/security.md)", f.Cert, ErrNotServer)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("%s is not valid under CA %s: %w", f.Cert, f.CA, err)
	}
	return m, nil
}

func (m *Material) certs() []tls.Certificate {
	if m.cert == nil {
		return nil
	}
	return []tls.Certificate{*m.cert}
}

// APIServer is the TLS configuration of the gRPC and HTTP ports: the
// server's certificate; a client certificate is verified when offered (it
// may carry an identity or a role) but not required, since bearer tokens
// authenticate most callers.
func (m *Material) APIServer() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: m.certs(), ClientCAs: m.pool,
		ClientAuth: tls.VerifyClientCertIfGiven, NextProtos: []string{"h2", "http/1.1"}}
}

// RaftServer is the acceptor's side of the raft port: a client certificate
// is required, must chain to the CA, and must carry the server identity.
func (m *Material) RaftServer() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: m.certs(), ClientCAs: m.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, VerifyConnection: requireServerPeer}
}

// RaftClient is the dialer's side of the raft port: it presents the
// server's certificate and accepts only a peer with the server identity.
func (m *Material) RaftClient() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: m.certs(), RootCAs: m.pool,
		ServerName: ServerName, VerifyConnection: requireServerPeer}
}

// APIClient is a client's configuration for the gRPC and HTTP ports:
// servers are verified against serverName (default ServerName, whatever
// address was dialled) and the client presents its certificate if it has
// one. Servers use it too, with their server certificate, for calls to
// other members (join, forwarding), where it identifies them as servers.
func (m *Material) APIClient(serverName string) *tls.Config {
	if serverName == "" {
		serverName = ServerName
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: m.certs(), RootCAs: m.pool, ServerName: serverName}
}
