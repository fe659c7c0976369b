package httpgateway

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimits bound the HTTP port's connections (docs/operations.md#slow-and-idle-clients).
type ConnLimits struct {
	// Max caps the connections open at once (<= 0: no cap). It bounds the
	// file descriptors clients can make the process hold.
	Max int
	// MaxUnauthenticated caps the connections that have not yet carried an
	// authenticated request (<= 0 or above Max: Max). They are the ones a
	// caller without credentials can open, so a flood of them never takes
	// the slots of connections that have proved a credential.
	MaxUnauthenticated int
}

// LimitedListener bounds the connections a member holds without letting
// slow or idle clients lock out valid ones. A connection is *waiting* while
// the server waits for it (TLS handshake, request headers, request body,
// idle between requests) and *working* while a handler runs for a request
// it delivered in full; it is *trusted* once a request on it was
// authorised with a credential (on an insecure member, once it delivered
// any request: there are no credentials). When a new connection would
// exceed a cap, the connection that has been waiting longest makes room —
// an untrusted one first, a trusted one only when the whole port is full —
// so a flood of connections that never finish a request costs each other
// their slots, never a client that sends its request promptly. Working
// connections are never evicted; only when every slot is working is a new
// connection answered 503 and closed. The read timeouts of the HTTP server
// close waiting connections in any case.
type LimitedListener struct {
	net.Listener
	max, maxUntrusted int

	mu        sync.Mutex
	conns     map[*trackedConn]struct{}
	untrusted int // of conns, not trusted

	refused atomic.Uint64
	evicted atomic.Uint64
}

// LimitListener wraps l with the caps of lim.
func LimitListener(l net.Listener, lim ConnLimits) *LimitedListener {
	untrusted := lim.MaxUnauthenticated
	if lim.Max > 0 && (untrusted <= 0 || untrusted > lim.Max) {
		untrusted = lim.Max
	}
	return &LimitedListener{Listener: l, max: max(lim.Max, 0), maxUntrusted: max(untrusted, 0), conns: map[*trackedConn]struct{}{}}
}

// Open is the number of connections open now.
func (l *LimitedListener) Open() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.conns))
}

// Unauthenticated is the number of open connections that are not trusted.
func (l *LimitedListener) Unauthenticated() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.untrusted)
}

// Refused counts connections answered 503 because every slot was working.
func (l *LimitedListener) Refused() uint64 { return l.refused.Load() }

// Evicted counts waiting connections closed to make room for a new one.
func (l *LimitedListener) Evicted() uint64 { return l.evicted.Load() }

// Max is the cap (0: none).
func (l *LimitedListener) Max() int64 { return int64(l.max) }

// MaxUnauthenticated is the cap on untrusted connections (0: none).
func (l *LimitedListener) MaxUnauthenticated() int64 { return int64(l.maxUntrusted) }

var overCapacity = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 86\r\n\r\n" +
	`{"error":{"code":"Unavailable","message":"too many open connections on this member"}}` + "\n")

// Accept implements net.Listener: it returns the next connection, first
// evicting the longest-waiting connection when a cap is reached; when
// nothing can be evicted the new connection is answered 503 and closed
// here, and Accept goes on waiting.
func (l *LimitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.admit(c); tc != nil {
			return tc, nil
		}
		l.refused.Add(1)
		go refuse(c)
	}
}

// admit makes room for c and tracks it, or returns nil when every slot
// that could make room is working.
func (l *LimitedListener) admit(c net.Conn) *trackedConn {
	var victims []*trackedConn
	defer func() {
		for _, v := range victims {
			l.evicted.Add(1)
			_ = v.Conn.Close() // its server goroutine sees the error and closes it
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxUntrusted > 0 && l.untrusted >= l.maxUntrusted {
		v := l.oldestWaitingLocked(false)
		if v == nil {
			return nil
		}
		victims = append(victims, v)
		l.dropLocked(v)
	}
	if l.max > 0 && len(l.conns) >= l.max {
		v := l.oldestWaitingLocked(false)
		if v == nil {
			v = l.oldestWaitingLocked(true)
		}
		if v == nil {
			return nil
		}
		victims = append(victims, v)
		l.dropLocked(v)
	}
	tc := &trackedConn{Conn: c, l: l, waitingSince: time.Now()}
	l.conns[tc] = struct{}{}
	l.untrusted++
	return tc
}

// oldestWaitingLocked is the waiting connection of the given trust that
// has waited longest, or nil.
func (l *LimitedListener) oldestWaitingLocked(trusted bool) *trackedConn {
	var oldest *trackedConn
	for c := range l.conns {
		if c.working > 0 || c.trusted != trusted {
			continue
		}
		if oldest == nil || c.waitingSince.Before(oldest.waitingSince) {
			oldest = c
		}
	}
	return oldest
}

// dropLocked stops tracking c (it is closed, or about to be).
func (l *LimitedListener) dropLocked(c *trackedConn) {
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if !c.trusted {
		l.untrusted--
	}
}

// refuse answers 503 and closes without reading the request.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(overCapacity)
	_ = c.Close()
}

// trackedConn is an accepted connection and its state; the fields below
// Conn are guarded by l.mu.
type trackedConn struct {
	net.Conn
	l            *LimitedListener
	working      int // requests being handled (HTTP/2 runs several at once)
	trusted      bool
	waitingSince time.Time
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	c.l.dropLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// beginWork marks a request on c as delivered in full: c is working and
// cannot be evicted until endWork.
func (c *trackedConn) beginWork() {
	c.l.mu.Lock()
	c.working++
	c.l.mu.Unlock()
}

// endWork marks that request done; trusted records that it was authorised
// with a credential. A connection with no request left waits again, from
// now.
func (c *trackedConn) endWork(trusted bool) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.working--
	if trusted && !c.trusted {
		c.trusted = true
		if _, ok := c.l.conns[c]; ok {
			c.l.untrusted--
		}
	}
	if c.working == 0 {
		c.waitingSince = time.Now()
	}
}

type connKey struct{}

// ConnContext is the http.Server.ConnContext hook that lets the gateway
// find the tracked connection a request came on (a TLS connection wraps
// it).
func (l *LimitedListener) ConnContext(ctx context.Context, c net.Conn) context.Context {
	for c != nil {
		if tc, ok := c.(*trackedConn); ok {
			return context.WithValue(ctx, connKey{}, tc)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	return ctx
}

// connOf is the tracked connection of a request (nil when the server does
// not use a LimitedListener, e.g. in tests).
func connOf(ctx context.Context) *trackedConn {
	tc, _ := ctx.Value(connKey{}).(*trackedConn)
	return tc
}
