package httpgateway

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// LimitedListener caps the connections open at once. A connection past the
// cap is answered 503 and closed at once, so a flood of idle connections
// costs the process at most max file descriptors (raft and the stores keep
// theirs) and never waits in the kernel's accept queue in front of a real
// request.
type LimitedListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused atomic.Uint64
}

// LimitListener wraps l with a cap of max open connections (max <= 0:
// no cap).
func LimitListener(l net.Listener, max int) *LimitedListener {
	return &LimitedListener{Listener: l, max: int64(max)}
}

// Open is the number of connections open now.
func (l *LimitedListener) Open() int64 { return l.open.Load() }

// Refused counts connections closed because the cap was reached.
func (l *LimitedListener) Refused() uint64 { return l.refused.Load() }

// Max is the cap (0: none).
func (l *LimitedListener) Max() int64 { return max(l.max, 0) }

var overCapacity = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 86\r\n\r\n" +
	`{"error":{"code":"Unavailable","message":"too many open connections on this member"}}` + "\n")

// Accept implements net.Listener: it returns the next connection while
// fewer than the limit are open; one over the limit is answered 503 and
// closed here, and Accept goes on waiting.
func (l *LimitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			l.refused.Add(1)
			go refuse(c)
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// refuse answers 503 and closes without reading the request.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(overCapacity)
	_ = c.Close()
}

type countedConn struct {
	net.Conn
	l    *LimitedListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
