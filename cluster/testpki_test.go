package cluster_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/security"
)

// Multi-process tests run the configuration users deploy: TLS on every
// port, mutual TLS on raft, and a token on every client call. TestMain
// makes one throwaway CA per test binary run (testPKI): a server
// certificate per member slot, a certificate per streaming node bound to
// its own node identity, and a bootstrap admin token that every fresh
// cluster installs.
// COORDD_TEST_INSECURE=1 runs them with --insecure instead; a test that
// is about plaintext says so with startInsecureClusterWith.

// maxMembers is how many member slots get their own server certificate
// (tests add members beyond the launcher's three).
const maxMembers = 7

// maxStreamingNodes is how many streaming nodes get a certificate bound to
// their own node identity (streaming node i: identity i+1).
const maxStreamingNodes = 4

// testPKI is the test binary's TLS material and admin token.
type testPKI struct {
	ca        string
	servers   []security.Files
	nodes     []security.Files // streaming node i: node identity i+1
	tokenFile string
	token     string
	tls       *tls.Config
	// proxy is a client certificate with the proxy role, and proxyTLS the
	// client TLS presenting it: what inserts show a streaming node, which
	// takes no tokens (coordd authenticates the token, which wins).
	proxy    security.Files
	proxyTLS *tls.Config
}

// pki is set by TestMain (nil with COORDD_TEST_INSECURE=1).
var pki *testPKI

func insecureRequested() bool { return os.Getenv("COORDD_TEST_INSECURE") == "1" }

// newTestPKI writes a fresh CA and its certificates into dir.
func newTestPKI(dir string) (*testPKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	from, to := now.Add(-time.Hour), now.Add(24*time.Hour)
	ca, err := security.NewCA("coordd multi-process tests CA", from, to)
	if err != nil {
		return nil, err
	}
	p := &testPKI{ca: filepath.Join(dir, "ca.crt"), tokenFile: filepath.Join(dir, "admin.token")}
	if err := os.WriteFile(p.ca, ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	for i := 0; i < maxMembers; i++ {
		kp, err := ca.IssueServer([]string{"127.0.0.1", "localhost"}, from, to)
		if err != nil {
			return nil, err
		}
		cert, key, err := kp.Write(dir, fmt.Sprintf("server-%d", i+1))
		if err != nil {
			return nil, err
		}
		p.servers = append(p.servers, security.Files{CA: p.ca, Cert: cert, Key: key})
	}
	for i := 0; i < maxStreamingNodes; i++ {
		kp, err := ca.IssueNode(uint64(i+1), from, to)
		if err != nil {
			return nil, err
		}
		cert, key, err := kp.Write(dir, fmt.Sprintf("node-%d", i+1))
		if err != nil {
			return nil, err
		}
		p.nodes = append(p.nodes, security.Files{CA: p.ca, Cert: cert, Key: key})
	}
	proxy, err := ca.IssueClient("proxy", "proxy", from, to)
	if err != nil {
		return nil, err
	}
	if p.proxy.Cert, p.proxy.Key, err = proxy.Write(dir, "proxy"); err != nil {
		return nil, err
	}
	p.proxy.CA = p.ca
	tok, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	p.token = tok.String()
	if err := os.WriteFile(p.tokenFile, []byte(p.token+"\n"), 0o600); err != nil {
		return nil, err
	}
	m, err := security.Load(security.Files{CA: p.ca})
	if err != nil {
		return nil, err
	}
	p.tls = m.APIClient("")
	pm, err := security.Load(p.proxy)
	if err != nil {
		return nil, err
	}
	p.proxyTLS = pm.APIClient("")
	return p, nil
}

// launch is the launcher's security for a test cluster.
func (p *testPKI) launch() *cluster.LaunchSecurity {
	return &cluster.LaunchSecurity{Server: p.servers[0], Servers: p.servers, Nodes: p.nodes, BootstrapTokenFile: p.tokenFile}
}

// ours reports whether l runs with the test binary's PKI (the helpers
// below then add its credentials); false for insecure clusters and for
// tests that bring their own PKI.
func ours(l *cluster.Launcher) bool {
	s := l.Security()
	return pki != nil && s != nil && s.BootstrapTokenFile == pki.tokenFile
}

// secured adds the admin token and TLS to cfg when l is secure; the TLS
// presents the proxy certificate, so the client's inserts are admitted by
// the streaming nodes.
func secured(l *cluster.Launcher, cfg client.Config) client.Config {
	if ours(l) {
		cfg.TLS, cfg.Token = pki.proxyTLS, pki.token
	}
	return cfg
}

// dialOptions are the gRPC dial options for l's members.
func dialOptions(l *cluster.Launcher) []grpc.DialOption {
	if ours(l) {
		return client.TransportOptions(pki.tls, pki.token)
	}
	return client.TransportOptions(nil, "")
}

// dialMember opens a connection to one of l's members.
func dialMember(t *testing.T, l *cluster.Launcher, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, dialOptions(l)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// memberArgsSec are member i's security flags (for members a test starts
// itself).
func memberArgsSec(l *cluster.Launcher, i int) []string { return l.Security().MemberArgs(i) }

// ctlArgs are coordctl's flags for l: endpoints and, when secure, the CA,
// the proxy certificate (for inserts) and the admin token.
func ctlArgs(l *cluster.Launcher) []string {
	args := []string{"--endpoints", l.Endpoints()}
	if ours(l) {
		args = append(args, "--tls-ca", pki.ca, "--tls-cert", pki.proxy.Cert, "--tls-key", pki.proxy.Key, "--token-file", pki.tokenFile)
	}
	return args
}

// memberURL is a URL on one of l's members' HTTP ports: https when l is
// secure.
func memberURL(l *cluster.Launcher, httpAddr, path string) string {
	if ours(l) {
		return "https://" + httpAddr + path
	}
	return "http://" + httpAddr + path
}

// httpClient is a client for the members' HTTP ports: it trusts the
// test CA and sends the admin token with https requests (never over
// plaintext).
func httpClient(timeout time.Duration) *http.Client {
	tr := &http.Transport{DisableKeepAlives: true}
	if pki == nil {
		return &http.Client{Timeout: timeout, Transport: tr}
	}
	tr.TLSClientConfig = pki.tls.Clone()
	return &http.Client{Timeout: timeout, Transport: bearerRT{tr, pki.token}}
}

type bearerRT struct {
	rt    http.RoundTripper
	token string
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if r.URL.Scheme == "https" && r.Header.Get("Authorization") == "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.rt.RoundTrip(r)
}

// dialAsServer connects to one of l's members presenting a server
// certificate instead of a token: the credential that needs no replicated
// state (docs/security.md: how to act as admin when no token works). A
// member restarted without a quorum has not replayed its log, so it knows
// no token yet and refuses every one (Unauthenticated).
func dialAsServer(t *testing.T, l *cluster.Launcher, addr string) *grpc.ClientConn {
	t.Helper()
	if !ours(l) {
		return dialMember(t, l, addr)
	}
	m, err := security.Load(pki.servers[0])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, client.TransportOptions(m.APIClient(""), "")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// nodeClient is a client of l holding streaming node i's own credential
// (its certificate, bound to node identity i+1), for calls only the node
// may make; on an insecure cluster, a plain client.
func nodeClient(t *testing.T, l *cluster.Launcher) func(i int) *client.Client {
	return func(i int) *client.Client {
		t.Helper()
		cfg := client.Config{Endpoints: strings.Split(l.Endpoints(), ","), RequestTimeout: 10 * time.Second}
		if ours(l) {
			m, err := security.Load(pki.nodes[i])
			if err != nil {
				t.Fatal(err)
			}
			cfg.TLS = m.APIClient("")
		}
		c, err := client.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// snDialOptions dial a streaming node's port as coordd does on a secure
// test run: TLS verifying the node's identity, presenting the server
// certificate (lifecycle calls, Assign and Remove, need it; tests that
// forge them test the node's own checks behind that one).
func snDialOptions() []grpc.DialOption {
	if pki == nil {
		return client.StreamingNodeDialOptions(nil)
	}
	m, err := security.Load(pki.servers[0])
	if err != nil {
		panic(fmt.Sprintf("test PKI: %v", err)) // written by TestMain a moment ago
	}
	return client.StreamingNodeDialOptions(m.APIClient(""))
}

// ownDevPKI is for tests that need a PKI of their own (client, proxy and
// node certificates beside the server's, as `coordd dev --secure` writes
// them) instead of the test binary's: it writes one under dir/pki with a
// bootstrap admin token, and returns the PKI, the token and its file.
func ownDevPKI(t *testing.T, dir string) (security.DevPKI, auth.Token, string) {
	t.Helper()
	pki, err := security.WriteDevPKI(filepath.Join(dir, "pki"), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	bootFile := filepath.Join(dir, "pki", "admin.token")
	if err := os.WriteFile(bootFile, []byte(boot.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return pki, boot, bootFile
}
