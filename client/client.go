package client

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/redial"
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("client: closed")

// Client is a coordd client. Create it with New and release it with Close.
type Client struct {
	cfg Config

	mu        sync.Mutex
	addrs     []string // pool, in trial order: configured endpoints, then learned ones
	conns     map[string]*grpc.ClientConn
	preferred string // endpoint of the last successful call
	closed    bool
}

// New validates cfg and returns a client. It does not wait for any
// connection: connections are made by the first calls. ctx is only checked
// for cancellation.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, conns: map[string]*grpc.ClientConn{}}
	for _, addr := range cfg.Endpoints {
		if _, err := c.addEndpointLocked(addr); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.preferred = cfg.Endpoints[0]
	return c, nil
}

// Close closes every connection. Calls in flight fail; later calls return
// ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var first error
	for _, cc := range c.conns {
		if err := cc.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Endpoints returns the current pool: the configured endpoints followed by
// any learned from leader hints.
func (c *Client) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.addrs...)
}

func (c *Client) addEndpointLocked(addr string) (*grpc.ClientConn, error) {
	if cc, ok := c.conns[addr]; ok {
		redial.Wake(cc) // every attempt is a real one (package redial)
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, append(c.cfg.dialOptions(),
		redial.Option(c.cfg.DialTimeout))...,
	)
	if err != nil {
		return nil, err
	}
	c.conns[addr] = cc
	c.addrs = append(c.addrs, addr)
	return cc, nil
}

// conn returns the connection for addr, adding addr to the pool if it is
// new (a leader hint).
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if err := ValidateEndpoint(addr); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return c.addEndpointLocked(addr)
}

// order returns the pool rotated to start at the preferred endpoint.
func (c *Client) order() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := 0
	for i, a := range c.addrs {
		if a == c.preferred {
			start = i
			break
		}
	}
	out := make([]string, 0, len(c.addrs))
	out = append(out, c.addrs[start:]...)
	return append(out, c.addrs[:start]...)
}

func (c *Client) setPreferred(addr string) {
	c.mu.Lock()
	c.preferred = addr
	c.mu.Unlock()
}

// waitReady waits up to DialTimeout for cc to be connected. A connection in
// TRANSIENT_FAILURE returns at once so that the RPC fails fast with grpc's
// own description of the connection error.
func (c *Client) waitReady(ctx context.Context, addr string, cc *grpc.ClientConn) error {
	s := cc.GetState()
	if s == connectivity.Ready || s == connectivity.TransientFailure {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	for {
		switch s {
		case connectivity.Ready, connectivity.TransientFailure:
			return nil
		case connectivity.Shutdown:
			return ErrClosed
		case connectivity.Idle:
			cc.Connect()
		}
		if !cc.WaitForStateChange(ctx, s) {
			return status.Errorf(codes.Unavailable, "%s: not connected after %v (%s)",
				addr, c.cfg.DialTimeout, s)
		}
		s = cc.GetState()
	}
}
