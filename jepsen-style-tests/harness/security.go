package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/security"
)

// Runs are secure by default: the configuration users deploy. Every run
// gets a throwaway CA, one server certificate per member (its own
// loopback address as an IP SAN), one certificate per streaming node bound
// to its own node identity (streaming node i: identity i+1), a bootstrap
// admin token, and, once the cluster is up, a read and a proxy token. JEPSEN_INSECURE=1 (or
// Config.Insecure, for the scenarios that are the explicit insecure
// variant) runs every port plaintext with --insecure instead.

// InsecureFromEnv reports whether JEPSEN_INSECURE=1 asks for plaintext runs.
func InsecureFromEnv() bool { return os.Getenv("JEPSEN_INSECURE") == "1" }

// Roles a run has tokens for: workload clients hold the proxy token, as
// a proxy would; the nemesis and the harness' checks the admin one.
const (
	RoleRead  = "read"
	RoleProxy = "proxy"
	RoleAdmin = "admin"
)

// maxStreamingNodes is how many streaming nodes get a certificate.
const maxStreamingNodes = 4

// Security is a secure run's PKI and credentials.
type Security struct {
	Dir    string
	CAFile string
	// Members[i] is member i's server certificate and key.
	Members []security.Files
	// Nodes[i] is streaming node i's certificate, bound to node identity
	// i+1: it may speak only for the sessions it registers.
	Nodes []security.Files
	// BootstrapFile holds the bootstrap admin token (every member gets
	// --bootstrap-token-file; the first leader installs it once).
	BootstrapFile string
	// ClientTLS trusts the run's CA; clients authenticate with tokens.
	ClientTLS *tls.Config
	// ProxyTLS is ClientTLS presenting the run's proxy certificate
	// (spiffe://coordd/role/proxy): what writers show a streaming node,
	// which takes no tokens. coordd still goes by the token sent with it.
	ProxyTLS *tls.Config

	tokens map[string]string // role -> secret; admin is the bootstrap token
}

// newSecurity writes the PKI for members on hosts into dir.
func newSecurity(dir string, hosts []string) (*Security, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki dir: %w", err)
	}
	now := time.Now()
	from, to := now.Add(-time.Hour), now.Add(24*time.Hour)
	ca, err := security.NewCA("coordd jepsen CA", from, to)
	if err != nil {
		return nil, err
	}
	s := &Security{Dir: dir, CAFile: filepath.Join(dir, "ca.crt"), tokens: map[string]string{}}
	if err := os.WriteFile(s.CAFile, ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	for i, h := range hosts {
		kp, err := ca.IssueServer([]string{h}, from, to)
		if err != nil {
			return nil, err
		}
		cert, key, err := kp.Write(dir, fmt.Sprintf("server-n%d", i+1))
		if err != nil {
			return nil, err
		}
		s.Members = append(s.Members, security.Files{CA: s.CAFile, Cert: cert, Key: key})
	}
	for i := 0; i < maxStreamingNodes; i++ {
		node, err := ca.IssueNode(uint64(i+1), from, to)
		if err != nil {
			return nil, err
		}
		cert, key, err := node.Write(dir, fmt.Sprintf("node-%d", i+1))
		if err != nil {
			return nil, err
		}
		s.Nodes = append(s.Nodes, security.Files{CA: s.CAFile, Cert: cert, Key: key})
	}
	proxy, err := ca.IssueClient("jepsen-proxy", "proxy", from, to)
	if err != nil {
		return nil, err
	}
	proxyCert, proxyKey, err := proxy.Write(dir, "proxy")
	if err != nil {
		return nil, err
	}
	boot, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	s.tokens[RoleAdmin] = boot.String()
	s.BootstrapFile = filepath.Join(dir, "admin.token")
	if err := os.WriteFile(s.BootstrapFile, []byte(boot.String()+"\n"), 0o600); err != nil {
		return nil, err
	}
	m, err := security.Load(security.Files{CA: s.CAFile})
	if err != nil {
		return nil, err
	}
	s.ClientTLS = m.APIClient("")
	pm, err := security.Load(security.Files{CA: s.CAFile, Cert: proxyCert, Key: proxyKey})
	if err != nil {
		return nil, err
	}
	s.ProxyTLS = pm.APIClient("")
	return s, nil
}

// memberArgs are member i's security flags.
func (s *Security) memberArgs(i int) []string {
	if s == nil {
		// Plaintext without authentication: the explicit insecure variant.
		return []string{"--insecure"}
	}
	f := s.Members[i]
	return []string{"--insecure=false", "--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key,
		"--bootstrap-token-file", s.BootstrapFile}
}

// StreamingArgs are streaming node i's flags for talking to coordd: its
// own certificate (node identity i+1).
func (s *Security) StreamingArgs(i int) []string {
	if s == nil {
		return nil
	}
	n := s.Nodes[i%len(s.Nodes)]
	return []string{"--tls-ca", n.CA, "--tls-cert", n.Cert, "--tls-key", n.Key}
}

// Token is the secret of a role's token ("" on an insecure run).
func (s *Security) Token(role string) string {
	if s == nil {
		return ""
	}
	return s.tokens[role]
}

// TLS is the clients' TLS configuration (nil on an insecure run).
func (s *Security) TLS() *tls.Config {
	if s == nil {
		return nil
	}
	return s.ClientTLS
}

// ClientConfig adds role's credentials to cfg: a proxy client also
// presents the proxy certificate, so its inserts reach streaming nodes.
func (s *Security) ClientConfig(role string, cfg client.Config) client.Config {
	if s != nil {
		cfg.TLS, cfg.Token = s.ClientTLS, s.tokens[role]
		if role == RoleProxy {
			cfg.TLS = s.ProxyTLS
		}
	}
	return cfg
}

// createTokens creates the read and proxy tokens with the bootstrap
// admin token and waits until every member accepts each of them (a
// follower learns a token when it applies its creation).
func (s *Security) createTokens(ctx context.Context, c *Cluster) error {
	admin, err := client.New(ctx, s.ClientConfig(RoleAdmin, client.Config{Endpoints: c.Endpoints(0), RequestTimeout: 10 * time.Second}))
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, r := range []struct{ name, role string }{{RoleRead, "read"}, {RoleProxy, "proxy"}} {
		var resp interface{ GetSecret() string }
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err = admin.CreateToken(ctx, r.role, "jepsen-"+r.name)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond) // the bootstrap token is installed once a leader is established
		}
		if err != nil {
			return fmt.Errorf("create %s token: %w", r.name, err)
		}
		s.tokens[r.name] = resp.GetSecret()
	}
	for role := range s.tokens {
		for i := range c.members {
			if err := s.waitAccepted(ctx, c.members[i].GRPCAddr, role); err != nil {
				return fmt.Errorf("%s token on %s: %w", role, c.members[i].ID, err)
			}
		}
	}
	return nil
}

// waitAccepted polls addr with role's token until a Status call succeeds.
func (s *Security) waitAccepted(ctx context.Context, addr, role string) error {
	cl, err := client.New(ctx, s.ClientConfig(role, client.Config{Endpoints: []string{addr}, MaxRetries: -1, RequestTimeout: 2 * time.Second}))
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cl.Status(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StreamingNodeDialOptions are the dial options for a streaming node's own
// port (appends and status go straight to the owner): TLS verifying the
// node's identity against the run's CA, presenting the proxy certificate
// (writes need a writer's certificate; Assign and Remove need coordd's
// server identity). Plaintext on an insecure run.
func (s *Security) StreamingNodeDialOptions() []grpc.DialOption {
	if s == nil {
		return client.StreamingNodeDialOptions(nil)
	}
	return client.StreamingNodeDialOptions(s.ProxyTLS)
}

// NodeTLS is a client TLS configuration presenting streaming node i's
// certificate (nil on an insecure run): the hostile nemesis holds it as
// "another streaming node".
func (s *Security) NodeTLS(i int) *tls.Config {
	if s == nil {
		return nil
	}
	m, err := security.Load(s.Nodes[i%len(s.Nodes)])
	if err != nil {
		return nil
	}
	return m.APIClient("")
}
