package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/security"
)

// TLSFiles are the PEM files a client needs for a TLS cluster: the
// cluster's CA (required) and, for mutual TLS, a client certificate and
// key. ServerName overrides the name servers are verified against
// (default security.ServerName, which every coordd server certificate
// carries).
type TLSFiles struct {
	CA, Cert, Key, ServerName string
}

// LoadTLS reads f into a client TLS configuration.
func LoadTLS(f TLSFiles) (*tls.Config, error) {
	m, err := security.Load(security.Files{CA: f.CA, Cert: f.Cert, Key: f.Key})
	if err != nil {
		return nil, fmt.Errorf("client TLS: %w", err)
	}
	return m.APIClient(f.ServerName), nil
}

// ReadTokenFile reads a bearer token from a file (surrounding white space
// dropped), for --token-file style flags.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// checkSecurity validates the TLS/token combination of a config.
func (c Config) checkSecurity() error {
	if c.Token != "" && c.TLS == nil {
		return errors.New("client: a token needs TLS (it would cross the network in clear text); set Config.TLS")
	}
	if strings.ContainsAny(c.Token, " \t\r\n") {
		return errors.New("client: the token contains white space")
	}
	return nil
}

// dialOptions are the transport and per-call credentials of every
// connection the client opens.
func (c Config) dialOptions() []grpc.DialOption { return TransportOptions(c.TLS, c.Token) }

// TransportOptions are the dial options for coordd's gRPC port: TLS with
// tlsCfg (plaintext when nil) and, when token is set, the bearer token on
// every call (only ever sent over TLS). Streaming nodes use it too.
func TransportOptions(tlsCfg *tls.Config, token string) []grpc.DialOption {
	if tlsCfg == nil {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
	}
	return opts
}

// StreamingNodeDialOptions are the dial options for a streaming node's
// port: with a cluster TLS configuration (the one for coordd, e.g. from
// LoadTLS), TLS that verifies the node's certificate against the same CA
// and its streaming-node identity (security.StreamingNodeClient); nil:
// plaintext. No bearer token is sent: a token is coordd's credential, and
// the node does not take it. A secure node admits writes (Insert, Append)
// only from a client certificate with the proxy or admin role, so a
// writer's tlsCfg carries one (LoadTLS with TLSFiles.Cert and Key;
// docs/security.md#the-streaming-nodes-port).
func StreamingNodeDialOptions(tlsCfg *tls.Config) []grpc.DialOption {
	if tlsCfg == nil {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(security.StreamingNodeClient(tlsCfg)))}
}

// bearer sends "authorization: Bearer <token>" with every call, and only
// over TLS.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// HTTPGet fetches path (e.g. "/metrics") from a member's HTTP port
// httpAddr with the client's transport security: https and its bearer
// token on a TLS cluster, plain http otherwise. At most limit bytes are
// read; a status other than 200 is an error naming it.
func (c *Client) HTTPGet(ctx context.Context, httpAddr, path string, limit int64) ([]byte, error) {
	scheme, tr := "http", &http.Transport{DisableKeepAlives: true}
	if c.cfg.TLS != nil {
		scheme, tr.TLSClientConfig = "https", c.cfg.TLS.Clone()
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+httpAddr+path, nil)
	if err != nil {
		return nil, err
	}
	if c.cfg.Token != "" && c.cfg.TLS != nil {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	return data, nil
}
