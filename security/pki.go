package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// CA is a throwaway certificate authority (ECDSA P-256) for `coordd dev
// --secure` and tests. Production clusters bring their own CA; the layout
// it must follow is in docs/security.md.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertPEM is the CA certificate, what every party trusts.
	CertPEM []byte
}

// KeyPair is one issued certificate and its private key, PEM encoded.
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// NewCA creates a self-signed CA valid from notBefore to notAfter.
func NewCA(commonName string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: commonName},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// IssueServer issues a server certificate: the server identity (URI SAN
// ServerURI, DNS SAN ServerName), the given extra host names and IPs, and
// both server and client authentication (a server dials its peers).
func (ca *CA) IssueServer(hosts []string, notBefore, notAfter time.Time) (KeyPair, error) {
	u, _ := url.Parse(ServerURI)
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "coordd server"}, URIs: []*url.URL{u},
		DNSNames: []string{ServerName}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl, notBefore, notAfter)
}

// IssueClient issues a client certificate named name (URI SAN
// ClientURIPrefix+name). A non-empty role adds RoleURIPrefix+role, which
// grants that role without a token. It never carries the server identity.
func (ca *CA) IssueClient(name, role string, notBefore, notAfter time.Time) (KeyPair, error) {
	uris := []*url.URL{}
	u, err := url.Parse(ClientURIPrefix + name)
	if err != nil {
		return KeyPair{}, fmt.Errorf("client name %q: %w", name, err)
	}
	uris = append(uris, u)
	if role != "" {
		r, err := url.Parse(RoleURIPrefix + role)
		if err != nil {
			return KeyPair{}, fmt.Errorf("role %q: %w", role, err)
		}
		uris = append(uris, r)
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "coordd client " + name}, URIs: uris,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return ca.issue(tmpl, notBefore, notAfter)
}

// IssueNode issues a streaming node's client certificate for node identity
// id: URI SANs ClientURIPrefix+"node-<id>" and NodeURI(id), which grant the
// node role bound to id without a token. It never carries the server
// identity.
func (ca *CA) IssueNode(id uint64, notBefore, notAfter time.Time) (KeyPair, error) {
	if id == 0 {
		return KeyPair{}, fmt.Errorf("node identity must be positive")
	}
	name := fmt.Sprintf("node-%d", id)
	c, err := url.Parse(ClientURIPrefix + name)
	if err != nil {
		return KeyPair{}, err
	}
	n, err := url.Parse(NodeURI(id))
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "coordd streaming " + name}, URIs: []*url.URL{c, n},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	return ca.issue(tmpl, notBefore, notAfter)
}

// issue signs tmpl with a fresh P-256 key.
func (ca *CA) issue(tmpl *x509.Certificate, notBefore, notAfter time.Time) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generate key: %w", err)
	}
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial(), notBefore, notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sign %q: %w", tmpl.Subject.CommonName, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS RNG does not fail on Linux
	}
	return n
}

// Write stores kp as dir/name.crt and dir/name.key (key mode 0600) and
// returns their paths.
func (kp KeyPair) Write(dir, name string) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, kp.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyPath, kp.KeyPEM, 0o600); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// DevNodes is how many streaming node certificates WriteDevPKI issues
// (node identities 1..DevNodes): as many as `coordd dev` can start, since
// the CA key is not kept to issue more later.
const DevNodes = 16

// DevPKI is what WriteDevPKI wrote.
type DevPKI struct {
	// Server is every member's certificate; Client identifies a user
	// (the role then comes from a token); Proxy carries the proxy role.
	Server, Client, Proxy Files
	// Nodes[i] is streaming node identity i+1's certificate (NodeURI).
	Nodes []Files
}

// Node returns the certificate of node identity id (1..DevNodes).
func (p DevPKI) Node(id int) Files { return p.Nodes[id-1] }

// DevPKIIn names the files WriteDevPKI writes into dir.
func DevPKIIn(dir string) DevPKI {
	ca := filepath.Join(dir, "ca.crt")
	f := func(name string) Files {
		return Files{CA: ca, Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
	}
	p := DevPKI{Server: f("server"), Client: f("client"), Proxy: f("proxy")}
	for i := 1; i <= DevNodes; i++ {
		p.Nodes = append(p.Nodes, f(fmt.Sprintf("node-%d", i)))
	}
	return p
}

// WriteDevPKI creates dir and writes a fresh CA (ca.crt; its key is not
// kept: nothing more is ever signed with it), a server certificate for
// loopback (server.crt/.key), a client certificate without a role
// (client.crt/.key), one with the proxy role (proxy.crt/.key) and one per
// streaming node identity 1..DevNodes (node-<i>.crt/.key, IssueNode),
// valid from now-1h for validity.
func WriteDevPKI(dir string, now time.Time, validity time.Duration) (DevPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DevPKI{}, fmt.Errorf("create %s: %w", dir, err)
	}
	from, to := now.Add(-time.Hour), now.Add(validity)
	ca, err := NewCA("coordd dev CA", from, to)
	if err != nil {
		return DevPKI{}, err
	}
	caPath := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caPath, ca.CertPEM, 0o644); err != nil {
		return DevPKI{}, err
	}
	srv, err := ca.IssueServer([]string{"127.0.0.1", "localhost"}, from, to)
	if err != nil {
		return DevPKI{}, err
	}
	cli, err := ca.IssueClient("dev", "", from, to)
	if err != nil {
		return DevPKI{}, err
	}
	proxy, err := ca.IssueClient("proxy", "proxy", from, to)
	if err != nil {
		return DevPKI{}, err
	}
	pairs := map[string]KeyPair{"server": srv, "client": cli, "proxy": proxy}
	for i := uint64(1); i <= DevNodes; i++ {
		if pairs[fmt.Sprintf("node-%d", i)], err = ca.IssueNode(i, from, to); err != nil {
			return DevPKI{}, err
		}
	}
	for name, kp := range pairs {
		if _, _, err := kp.Write(dir, name); err != nil {
			return DevPKI{}, err
		}
	}
	return DevPKIIn(dir), nil
}
