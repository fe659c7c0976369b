package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type pkiFixture struct {
	dir                           string
	ca                            *CA
	server, node, bound, cli, bad KeyPair // bound: bound to node identity 3; bad: a node certificate from another CA
}

func newPKIFixture(t *testing.T) pkiFixture {
	t.Helper()
	now := time.Now()
	from, to := now.Add(-time.Hour), now.Add(time.Hour)
	mk := func(kp KeyPair, err error) KeyPair {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	ca, err := NewCA("test CA", from, to)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other CA", from, to)
	if err != nil {
		t.Fatal(err)
	}
	f := pkiFixture{dir: t.TempDir(), ca: ca,
		server: mk(ca.IssueServer([]string{"127.0.0.1"}, from, to)),
		node:   mk(ca.IssueClient("streamingnode", "node", from, to)),
		bound:  mk(ca.IssueNode(3, from, to)),
		cli:    mk(ca.IssueClient("dev", "", from, to)),
		bad:    mk(other.IssueClient("streamingnode", "node", from, to))}
	if err := os.WriteFile(filepath.Join(f.dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// material loads kp (nil: no certificate) under the fixture's CA.
func (f pkiFixture) material(t *testing.T, name string, kp *KeyPair) *Material {
	t.Helper()
	files := Files{CA: filepath.Join(f.dir, "ca.crt")}
	if kp != nil {
		var err error
		if files.Cert, files.Key, err = kp.Write(f.dir, name); err != nil {
			t.Fatal(err)
		}
	}
	m, err := Load(files)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func leafOf(t *testing.T, kp KeyPair) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(kp.CertPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIsStreamingNodeCert(t *testing.T) {
	f := newPKIFixture(t)
	for name, tc := range map[string]struct {
		kp   KeyPair
		want bool
	}{"node role": {f.node, true}, "node identity": {f.bound, true}, "server": {f.server, false}, "client without role": {f.cli, false}} {
		if got := IsStreamingNodeCert(leafOf(t, tc.kp)); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	if IsStreamingNodeCert(nil) {
		t.Error("nil certificate")
	}
}

// handshake runs a TLS handshake over a loopback connection and returns
// the client's error (the server's when the client's is nil).
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		srvErr <- tls.Server(conn, server).Handshake()
	}()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	c := tls.Client(conn, client)
	err = c.Handshake()
	if err == nil {
		// TLS 1.3: the server verifies the client after the client's
		// handshake returns; a read surfaces the server's verdict.
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, _ = c.Read(make([]byte, 1))
	}
	conn.Close()
	if serr := <-srvErr; err == nil {
		err = serr
	}
	return err
}

// The streaming node's port serves its node certificate; callers verify
// the chain against the cluster CA and the streaming-node identity, not a
// host name. A server certificate where a node should be, or a node
// certificate of another CA, is refused; the node refuses to serve with a
// certificate that is not a node's.
func TestStreamingNodeTLS(t *testing.T) {
	f := newPKIFixture(t)
	nodeSrv, err := f.material(t, "node", &f.node).StreamingNodeServer()
	if err != nil {
		t.Fatal(err)
	}
	coordd := StreamingNodeClient(f.material(t, "server", &f.server).APIClient(""))
	anon := StreamingNodeClient(f.material(t, "anon", nil).APIClient(""))
	if err := handshake(t, nodeSrv, coordd); err != nil {
		t.Fatalf("coordd to the node: %v", err)
	}
	if err := handshake(t, nodeSrv, anon); err != nil {
		t.Fatalf("a client without a certificate to the node: %v", err)
	}
	boundSrv, err := f.material(t, "bound", &f.bound).StreamingNodeServer()
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, boundSrv, coordd); err != nil {
		t.Fatalf("coordd to a node with a node-bound certificate: %v", err)
	}
	// A coordd server certificate is not a streaming node's.
	impostor := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: f.material(t, "server2", &f.server).certs()}
	if err := handshake(t, impostor, anon); !errors.Is(err, ErrNotStreamingNode) {
		t.Fatalf("a server certificate as a streaming node: %v, want ErrNotStreamingNode", err)
	}
	// Another CA's node certificate does not verify.
	foreign := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: f.material(t, "bad", &f.bad).certs()}
	if err := handshake(t, foreign, anon); err == nil {
		t.Fatal("a node certificate of another CA was accepted")
	}
	// The node does not serve with a certificate that is not a node's.
	for name, kp := range map[string]*KeyPair{"server": &f.server, "client": &f.cli, "none": nil} {
		if _, err := f.material(t, name+"-srv", kp).StreamingNodeServer(); err == nil {
			t.Errorf("StreamingNodeServer with the %s certificate: no error", name)
		}
	}
	if StreamingNodeClient(nil) != nil {
		t.Error("StreamingNodeClient(nil) is not nil")
	}
}

// CheckNodeIdentity: a certificate naming a node identity must name the
// registration's; one naming none (the node role alone) and an unbound
// registration pass.
func TestCheckNodeIdentity(t *testing.T) {
	f := newPKIFixture(t)
	cs := func(kp KeyPair) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{leafOf(t, kp)}}
	}
	for name, tc := range map[string]struct {
		cs    tls.ConnectionState
		bound uint64
		ok    bool
	}{
		"bound to its identity":      {cs(f.bound), 3, true},
		"bound to another identity":  {cs(f.bound), 4, false},
		"unbound registration":       {cs(f.bound), 0, true},
		"role-only certificate":      {cs(f.node), 4, true},
		"no certificate (plaintext)": {tls.ConnectionState{}, 4, true},
	} {
		err := CheckNodeIdentity(tc.cs, tc.bound)
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrWrongNode)) {
			t.Errorf("%s: %v, want ok=%v", name, err, tc.ok)
		}
	}
}

// roleCerts are client certificates of each role beside the fixture's.
type roleCerts struct{ proxy, admin, read, odd *x509.Certificate }

func newRoleCerts(t *testing.T, f pkiFixture) roleCerts {
	t.Helper()
	from, to := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	issue := func(name, role string) *x509.Certificate {
		kp, err := f.ca.IssueClient(name, role, from, to)
		if err != nil {
			t.Fatal(err)
		}
		return leafOf(t, kp)
	}
	return roleCerts{proxy: issue("proxy", "proxy"), admin: issue("ops", "admin"), read: issue("grafana", "read"), odd: issue("odd", "root")}
}

func TestCheckDataPathWriter(t *testing.T) {
	f := newPKIFixture(t)
	rc := newRoleCerts(t, f)
	proxy, admin, read, odd := rc.proxy, rc.admin, rc.read, rc.odd
	for name, tc := range map[string]struct {
		leaf *x509.Certificate
		self uint64
		want error // nil: admitted
	}{
		"coordd's server certificate":            {leafOf(t, f.server), 3, nil},
		"a proxy certificate":                    {proxy, 3, nil},
		"an admin certificate":                   {admin, 3, nil},
		"a legacy node-role certificate":         {leafOf(t, f.node), 3, nil},
		"the node's own certificate":             {leafOf(t, f.bound), 3, nil},
		"another node's certificate":             {leafOf(t, f.bound), 4, ErrNotWriter},
		"a read certificate":                     {read, 3, ErrNotWriter},
		"no certificate":                         {nil, 3, ErrNoWriterCredential},
		"a certificate without a role":           {leafOf(t, f.cli), 3, ErrNoWriterCredential},
		"a certificate with an unknown role":     {odd, 3, ErrNoWriterCredential},
		"a certificate with two roles":           {uriCert(t, RoleURIPrefix+"read", RoleURIPrefix+"proxy"), 3, ErrNoWriterCredential},
		"a certificate with two roles, reversed": {uriCert(t, RoleURIPrefix+"proxy", RoleURIPrefix+"read"), 3, ErrNoWriterCredential},
	} {
		err := CheckDataPathWriter(tc.leaf, tc.self)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// TestCheckDataPathReader: any certificate of the cluster that names a role
// or a node may read a WAL; none, a role-less one or an unknown role may
// not.
func TestCheckDataPathReader(t *testing.T) {
	f := newPKIFixture(t)
	rc := newRoleCerts(t, f)
	for name, tc := range map[string]struct {
		leaf  *x509.Certificate
		admit bool
	}{
		"coordd's server certificate":        {leafOf(t, f.server), true},
		"a read certificate":                 {rc.read, true},
		"a proxy certificate":                {rc.proxy, true},
		"a streaming node's certificate":     {leafOf(t, f.bound), true},
		"a legacy node-role certificate":     {leafOf(t, f.node), true},
		"no certificate":                     {nil, false},
		"a certificate without a role":       {leafOf(t, f.cli), false},
		"a certificate with an unknown role": {rc.odd, false},
		// Probe L11: two identities are refused, not read as the first.
		"a node certificate naming role admin too": {uriCert(t, NodeURI(2), RoleURIPrefix+"admin"), false},
		"a certificate with two roles":             {uriCert(t, RoleURIPrefix+"read", RoleURIPrefix+"admin"), false},
		"a node certificate naming role node too":  {uriCert(t, NodeURI(2), RoleURIPrefix+"node"), true},
	} {
		err := CheckDataPathReader(tc.leaf)
		if tc.admit != (err == nil) || (err != nil && !errors.Is(err, ErrNoReaderCredential)) {
			t.Errorf("%s: %v, want admitted=%v", name, err, tc.admit)
		}
	}
}

// uriCert is a certificate carrying only these URI SANs: what the identity
// checks read (the chain is verified before they run).
func uriCert(t *testing.T, uris ...string) *x509.Certificate {
	t.Helper()
	c := &x509.Certificate{}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		c.URIs = append(c.URIs, u)
	}
	return c
}

// TestCertRoleRefusesTwoRoles (probe L11): a certificate with two role
// URIs grants neither, in either order; one role URI, or a role URI
// beside other URIs, grants that role.
func TestCertRoleRefusesTwoRoles(t *testing.T) {
	for _, tc := range []struct {
		uris []string
		want string
		ok   bool
	}{
		{[]string{RoleURIPrefix + "read"}, "read", true},
		{[]string{ClientURIPrefix + "ops", RoleURIPrefix + "admin"}, "admin", true},
		{[]string{ClientURIPrefix + "ops"}, "", true},
		{[]string{RoleURIPrefix + "read", RoleURIPrefix + "admin"}, "", false},
		{[]string{RoleURIPrefix + "admin", RoleURIPrefix + "read"}, "", false},
		{[]string{RoleURIPrefix + "proxy", RoleURIPrefix + "proxy"}, "", false},
	} {
		r, err := CertRole(uriCert(t, tc.uris...))
		if r != tc.want || (err == nil) != tc.ok {
			t.Errorf("CertRole(%v) = %q, %v; want %q, ok=%v", tc.uris, r, err, tc.want, tc.ok)
		}
	}
}
