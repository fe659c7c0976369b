// Package proxy is a fault-injecting TCP proxy for one directed link
// (member A dialling member B) on loopback. The Jepsen-style harness puts
// one proxy on every directed raft link and switches its mode at runtime:
//
//   - Pass: forward bytes unchanged.
//   - Delay: forward bytes, each chunk held for a fixed delay plus a random
//     jitter; order within a connection is kept (a slow pipe, not a
//     reordering one).
//   - Blackhole: accept connections but drop every byte in both directions;
//     connections stay open and hang, so callers see timeouts, not errors.
//     A connection that lost bytes is reset when the mode changes again,
//     since a TCP stream with a hole in it is not something a real network
//     can produce (a real partition that long ends the connection too).
//   - Reset: reset every live connection and every new one (the peer sees
//     "connection reset" / "connection refused"-like failures at once).
//
// Close stops the listener and every connection and waits for all the
// proxy's goroutines.
package proxy

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is the fault mode of a proxy.
type Mode int

const (
	Pass Mode = iota
	Delay
	Blackhole
	Reset
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Delay:
		return "delay"
	case Blackhole:
		return "blackhole"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Stats counts what a proxy has done since it started.
type Stats struct {
	Accepted  int64 // connections accepted
	Refused   int64 // connections reset at accept (Reset mode) or failed upstream dials
	Forwarded int64 // bytes forwarded (both directions)
	Dropped   int64 // bytes dropped (Blackhole)
	Resets    int64 // live connections reset (Reset mode, Close, poisoned on heal)
}

// Proxy forwards connections accepted on its listener to one target.
type Proxy struct {
	name   string
	ln     net.Listener
	target string

	mu     sync.Mutex
	mode   Mode
	delay  time.Duration
	jitter time.Duration
	rng    *rand.Rand
	conns  map[*pair]struct{}
	closed bool

	wg sync.WaitGroup

	accepted, refused, forwarded, dropped, resets atomic.Int64
}

// pair is one proxied connection: down is the dialler's side, up the
// target's.
type pair struct {
	down, up net.Conn
	// poisoned: bytes were dropped; the stream can never be whole again.
	poisoned atomic.Bool
	once     sync.Once
	done     chan struct{}
}

// New listens on listen (e.g. "127.0.0.5:0") and forwards every accepted
// connection to target. seed seeds the delay jitter.
func New(name, listen, target string, seed uint64) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: listen %s: %w", name, listen, err)
	}
	p := &Proxy{
		name: name, ln: ln, target: target,
		rng:   rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		conns: map[*pair]struct{}{},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Name is the name given to New (e.g. "n1->n2").
func (p *Proxy) Name() string { return p.name }

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted: p.accepted.Load(), Refused: p.refused.Load(), Forwarded: p.forwarded.Load(),
		Dropped: p.dropped.Load(), Resets: p.resets.Load(),
	}
}

// Pass heals the link.
func (p *Proxy) Pass() { p.setMode(Pass, 0, 0) }

// Blackhole drops every byte in both directions, keeping connections open.
func (p *Proxy) Blackhole() { p.setMode(Blackhole, 0, 0) }

// Reset resets every live connection and refuses new ones.
func (p *Proxy) Reset() { p.setMode(Reset, 0, 0) }

// SetDelay forwards every chunk after fixed plus a uniform random jitter in
// [0, jitter).
func (p *Proxy) SetDelay(fixed, jitter time.Duration) { p.setMode(Delay, fixed, jitter) }

// SetMode switches to m (Delay keeps the last delay settings).
func (p *Proxy) SetMode(m Mode) {
	p.mu.Lock()
	d, j := p.delay, p.jitter
	p.mu.Unlock()
	p.setMode(m, d, j)
}

func (p *Proxy) setMode(m Mode, delay, jitter time.Duration) {
	p.mu.Lock()
	prev := p.mode
	p.mode = m
	if m == Delay {
		p.delay, p.jitter = delay, jitter
	}
	var kill []*pair
	for c := range p.conns {
		// Reset ends everything; leaving Blackhole ends the connections
		// that lost bytes.
		if m == Reset || (prev == Blackhole && m != Blackhole && c.poisoned.Load()) {
			kill = append(kill, c)
		}
	}
	p.mu.Unlock()
	for _, c := range kill {
		p.resets.Add(1)
		c.close(true)
	}
}

// Close stops accepting, resets every connection and waits for the proxy's
// goroutines to end. Safe to call twice.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var all []*pair
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range all {
		c.close(true)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

// rst closes c with a TCP RST rather than a FIN.
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (c *pair) close(reset bool) {
	c.once.Do(func() {
		close(c.done)
		for _, conn := range []net.Conn{c.down, c.up} {
			if conn == nil {
				continue
			}
			if reset {
				rst(conn)
			} else {
				_ = conn.Close()
			}
		}
	})
}

func (p *Proxy) handle(down net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	mode, closed := p.mode, p.closed
	p.mu.Unlock()
	if mode == Reset || closed {
		p.refused.Add(1)
		rst(down)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		p.refused.Add(1)
		rst(down)
		return
	}
	c := &pair{down: down, up: up, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.mode == Reset {
		p.mu.Unlock()
		p.refused.Add(1)
		c.close(true)
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(c, up, down) }()
	go func() { defer wg.Done(); p.pipe(c, down, up) }()
	wg.Wait()
	c.close(false)
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// chunk is data read from one side, due for writing to the other at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst through a queue so that delayed chunks do not
// slow down reading (a slow link, not a narrow one). It returns when either
// side fails or the pair is closed; on a clean EOF it half-closes dst.
func (p *Proxy) pipe(c *pair, dst, src net.Conn) {
	q := make(chan chunk, 256)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-c.done:
					t.Stop()
					return
				}
			}
			if _, err := dst.Write(ch.data); err != nil {
				c.close(false)
				return
			}
			p.forwarded.Add(int64(len(ch.data)))
		}
	}()

	var last time.Time
	buf := make([]byte, 32<<10)
	var readErr error
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			mode := p.mode
			var d time.Duration
			if mode == Delay {
				d = p.delay
				if p.jitter > 0 {
					d += time.Duration(p.rng.Int64N(int64(p.jitter)))
				}
			}
			p.mu.Unlock()
			switch mode {
			case Blackhole:
				c.poisoned.Store(true)
				p.dropped.Add(int64(n))
			case Reset:
				// setMode is about to reset this pair.
				p.dropped.Add(int64(n))
			default:
				due := time.Now().Add(d)
				if due.Before(last) {
					due = last // keep order
				}
				last = due
				data := append([]byte(nil), buf[:n]...)
				select {
				case q <- chunk{data: data, due: due}:
				case <-c.done:
				case <-writerDone:
				}
			}
		}
		if err != nil {
			readErr = err
			break
		}
		select {
		case <-c.done:
			readErr = net.ErrClosed
		case <-writerDone:
			readErr = net.ErrClosed
		default:
		}
		if readErr != nil {
			break
		}
	}
	close(q)
	<-writerDone
	if errors.Is(readErr, io.EOF) {
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
			return
		}
	}
	c.close(false)
}
