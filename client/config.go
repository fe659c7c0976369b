package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultDialTimeout           = time.Second
	DefaultRequestTimeout        = 5 * time.Second
	DefaultMaxRetries            = 30
	DefaultOutcomeUnknownRetries = 1

	backoffStart = 20 * time.Millisecond
	backoffCap   = 500 * time.Millisecond
)

// Config configures a Client. Only Endpoints is required.
type Config struct {
	// Endpoints are the gRPC addresses (host:port) of coordd nodes, tried
	// in this order. Duplicates are dropped.
	Endpoints []string
	// DialTimeout bounds how long one attempt waits for its endpoint's
	// connection to become ready before moving to the next endpoint.
	// Zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// RequestTimeout bounds a whole call, retries included, when the
	// caller's context has no earlier deadline. For Snapshot it bounds
	// finding the leader and the wait for each chunk, not the transfer.
	// Zero means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// AttemptTimeout bounds one attempt, so a node that accepted the
	// connection but stopped answering does not use up the whole call.
	// Zero means RequestTimeout/2; negative means no per-attempt bound.
	AttemptTimeout time.Duration
	// MaxRetries is the retry budget of one call (attempts after the
	// first). Zero means DefaultMaxRetries; negative means no retries.
	MaxRetries int
	// OutcomeUnknownRetries bounds, within MaxRetries, how often a call
	// whose repeat changes nothing more (AddVoter, RemoveMember,
	// TransferLeader to a named target, RevokeToken, AbandonBroadcast,
	// FlushAll) is resent after an attempt whose outcome is unknown; the
	// resend may answer as if the first had not happened (NotFound for a
	// removal that did), with IsOutcomeUnknown set. Calls deduplicated by
	// a request ID (Broadcast among them) are resent within MaxRetries;
	// CreateToken, an untargeted TransferLeader and ResetReplicateRole
	// never are (docs/semantics.md#client-retries). Zero means
	// DefaultOutcomeUnknownRetries; negative means never.
	OutcomeUnknownRetries int
	// TLS, when set, is the transport security of every connection
	// (LoadTLS builds it); nil means plaintext. Insert on a secure
	// cluster needs it to carry a client certificate with the proxy (or
	// admin) role: streaming nodes take no tokens.
	TLS *tls.Config
	// Token, when set, is sent as "authorization: Bearer <token>" with
	// every call; it needs TLS.
	Token string
}

func (c Config) withDefaults() (Config, error) {
	var eps []string
	seen := map[string]bool{}
	for _, e := range c.Endpoints {
		e = strings.TrimSpace(e)
		if err := ValidateEndpoint(e); err != nil {
			return c, err
		}
		if !seen[e] {
			seen[e] = true
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return c, errors.New("client: no endpoints configured")
	}
	c.Endpoints = eps
	if err := c.checkSecurity(); err != nil {
		return c, err
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = c.RequestTimeout / 2
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	switch {
	case c.OutcomeUnknownRetries == 0:
		c.OutcomeUnknownRetries = DefaultOutcomeUnknownRetries
	case c.OutcomeUnknownRetries < 0:
		c.OutcomeUnknownRetries = 0
	}
	return c, nil
}

// ValidateEndpoint reports whether addr is a usable endpoint: host:port
// with a non-empty host and a port in 1..65535.
func ValidateEndpoint(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad endpoint %q: want host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("bad endpoint %q: empty host", addr)
	}
	if strings.ContainsAny(host, " \t/") {
		return fmt.Errorf("bad endpoint %q: bad host", addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("bad endpoint %q: port must be 1..65535", addr)
	}
	return nil
}
