// Package conncache keeps one gRPC client connection per streaming-node
// address for the leader's controllers, and closes the ones no call has
// used for a while: node addresses change with restarts, pods and IPs, and
// each cached connection keeps resolver and balancer goroutines alive.
package conncache

import (
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"

	"github.com/coordd/coordd/redial"
	"github.com/coordd/coordd/security"
)

// DefaultIdle is how long an unused connection is kept.
const DefaultIdle = 10 * time.Minute

// ErrClosed: the cache was closed.
var ErrClosed = errors.New("conncache: closed")

type entry struct {
	conn     *grpc.ClientConn
	lastUsed time.Time
}

// Cache maps addresses to connections.
type Cache struct {
	idle time.Duration
	now  func() time.Time
	dial []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*entry
	closed bool
}

// New returns a cache that closes connections unused for idle (DefaultIdle
// when idle <= 0); now is the clock (time.Now when nil). dial are the
// options of every connection; without them connections are plaintext
// (an insecure cluster). A secure coordd passes TLS that presents its
// server certificate and verifies the node's (security.StreamingNodeClient).
func New(idle time.Duration, now func() time.Time, dial ...grpc.DialOption) *Cache {
	if idle <= 0 {
		idle = DefaultIdle
	}
	if now == nil {
		now = time.Now
	}
	if len(dial) == 0 {
		dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	dial = append([]grpc.DialOption{redial.Option(5 * time.Second)}, dial...)
	return &Cache{idle: idle, now: now, dial: dial, conns: map[string]*entry{}}
}

// Get returns the connection to addr, dialling it (lazily) if needed, and
// closes every other connection idle for longer than the cache's limit.
func (c *Cache) Get(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	now := c.now()
	for a, e := range c.conns {
		if a != addr && now.Sub(e.lastUsed) > c.idle {
			_ = e.conn.Close()
			delete(c.conns, a)
		}
	}
	e, ok := c.conns[addr]
	if !ok {
		conn, err := grpc.NewClient(addr, c.dial...)
		if err != nil {
			return nil, err
		}
		e = &entry{conn: conn}
		c.conns[addr] = e
	}
	e.lastUsed = now
	redial.Wake(e.conn) // the caller retries on its own schedule (package redial)
	return e.conn, nil
}

// Len is the number of cached connections.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// Close closes every connection; later Gets fail with ErrClosed.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for a, e := range c.conns {
		_ = e.conn.Close()
		delete(c.conns, a)
	}
}

// CheckNode checks the streaming node that answered a call (p, filled by
// grpc.Peer) against the node identity its registration is bound to
// (security.CheckNodeIdentity); plaintext connections pass.
func CheckNode(p *peer.Peer, bound uint64) error {
	if p == nil {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return security.CheckNodeIdentity(ti.State, bound)
}
