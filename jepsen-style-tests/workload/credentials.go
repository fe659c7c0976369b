package workload

import (
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/client"
)

// Roles workload clients authenticate as on a secure run (tokens the
// harness created). Each client uses the least role its calls need.
const (
	RoleRead  = "read"
	RoleProxy = "proxy" // what a proxy calls: allocation, inserts, flushes, broadcasts, manifest commits
	RoleAdmin = "admin" // replication updates, abandoning broadcasts, the orphan collector
)

// Credentials are how a run's clients authenticate; nil in Env means an
// insecure run (plaintext, no tokens).
type Credentials struct {
	// TLS trusts the run's CA; ProxyTLS also presents the run's proxy
	// certificate, which proxy clients use (their inserts reach streaming
	// nodes, which take no tokens).
	TLS, ProxyTLS *tls.Config
	// Tokens maps a role to its token's secret.
	Tokens map[string]string
	// StreamingNode are the dial options for a streaming node's own port
	// (appends go straight to the owner: TLS verifying the node's
	// identity, presenting the proxy certificate); nil dials plaintext.
	StreamingNode []grpc.DialOption
}

// ClientConfig is ClientConfig(endpoints) with role's credentials.
func (e Env) ClientConfig(role string, endpoints []string) client.Config {
	return e.Creds.apply(role, ClientConfig(endpoints))
}

// Config adds role's credentials to cfg.
func (e Env) Config(role string, cfg client.Config) client.Config { return e.Creds.apply(role, cfg) }

func (c *Credentials) apply(role string, cfg client.Config) client.Config {
	if c != nil {
		cfg.TLS, cfg.Token = c.TLS, c.Tokens[role]
		if role == RoleProxy && c.ProxyTLS != nil {
			cfg.TLS = c.ProxyTLS
		}
	}
	return cfg
}

// DialStreamingNode connects to a streaming node's own port.
func (e Env) DialStreamingNode(addr string) (*grpc.ClientConn, error) {
	if e.Creds != nil && e.Creds.StreamingNode != nil {
		return grpc.NewClient(addr, e.Creds.StreamingNode...)
	}
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
