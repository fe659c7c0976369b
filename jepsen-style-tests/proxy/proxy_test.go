package proxy

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// echoServer echoes every line back; it stops at test cleanup.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New("a->b", "127.0.0.1:0", echoServer(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and waits up to wait for the echo.
func (c *client) roundTrip(line string, wait time.Duration) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(wait))
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	s, err := c.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPass(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	for i := 0; i < 10; i++ {
		got, err := c.roundTrip("hello", time.Second)
		if err != nil || got != "hello" {
			t.Fatalf("round trip %d: %q, %v", i, got, err)
		}
	}
	deadline := time.Now().Add(time.Second)
	for p.Stats().Forwarded != 2*10*6 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := p.Stats(); s.Accepted != 1 || s.Forwarded != 2*10*6 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDelay(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	p.SetDelay(50*time.Millisecond, 20*time.Millisecond)
	if p.Mode() != Delay {
		t.Fatalf("mode %v", p.Mode())
	}
	start := time.Now()
	got, err := c.roundTrip("slow", 2*time.Second)
	if err != nil || got != "slow" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	// Both directions go through the proxy: at least 2 x 50 ms.
	if el := time.Since(start); el < 100*time.Millisecond || el > time.Second {
		t.Fatalf("delayed round trip took %v, want 100ms..1s", el)
	}
	// Many chunks in flight keep their order.
	var want strings.Builder
	for i := 0; i < 50; i++ {
		line := strings.Repeat(string(rune('a'+i%26)), i+1)
		want.WriteString(line + "\n")
		if _, err := c.c.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, want.Len())
	if _, err := io.ReadFull(c.r, buf); err != nil || string(buf) != want.String() {
		t.Fatalf("delayed stream reordered or cut: err=%v", err)
	}
	p.Pass()
	// A delay still in force makes every round trip take at least 100 ms;
	// a loaded machine only slows some. So the fastest of a few round trips
	// must be well under that.
	fastest := time.Hour
	for i := 0; i < 5 && fastest > 80*time.Millisecond; i++ {
		start = time.Now()
		if _, err := c.roundTrip("fast", time.Second); err != nil {
			t.Fatal(err)
		}
		fastest = min(fastest, time.Since(start))
	}
	if fastest > 80*time.Millisecond {
		t.Fatalf("after heal the fastest of 5 round trips took %v", fastest)
	}
}

func TestBlackholeHangsThenResetsPoisonedConns(t *testing.T) {
	p := newProxy(t)
	idle := dial(t, p) // sends nothing during the blackhole: survives it
	if _, err := idle.roundTrip("x", time.Second); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	if _, err := c.roundTrip("before", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	_, err := c.roundTrip("lost", 300*time.Millisecond)
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("blackholed round trip: want timeout, got %v", err)
	}
	// New connections are accepted but hang too.
	c2 := dial(t, p)
	if _, err := c2.roundTrip("new", 200*time.Millisecond); err == nil {
		t.Fatal("round trip through a new blackholed connection succeeded")
	}
	if p.Stats().Dropped == 0 {
		t.Fatal("no bytes counted as dropped")
	}
	p.Pass()
	// The connection that lost bytes is reset; the idle one still works.
	_ = c.c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Fatal("poisoned connection still delivered data after heal")
	}
	if got, err := idle.roundTrip("still", time.Second); err != nil || got != "still" {
		t.Fatalf("idle connection after heal: %q, %v", got, err)
	}
	c3 := dial(t, p)
	if got, err := c3.roundTrip("healed", time.Second); err != nil || got != "healed" {
		t.Fatalf("new connection after heal: %q, %v", got, err)
	}
}

func TestResetRefusesThenHeals(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	if _, err := c.roundTrip("a", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if _, err := c.roundTrip("b", time.Second); err == nil {
		t.Fatal("live connection survived Reset")
	}
	// The listener accepts, then resets at once (the dial itself may see
	// the reset).
	if conn, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c2 := &client{c: conn, r: bufio.NewReader(conn)}
		if _, err := c2.roundTrip("c", time.Second); err == nil {
			t.Fatal("new connection worked in Reset mode")
		}
		conn.Close()
	}
	if p.Stats().Refused == 0 || p.Stats().Resets == 0 {
		t.Fatalf("stats %+v", p.Stats())
	}
	p.Pass()
	c3 := dial(t, p)
	if got, err := c3.roundTrip("d", time.Second); err != nil || got != "d" {
		t.Fatalf("after heal: %q, %v", got, err)
	}
}

func TestTargetDownRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()
	p, err := New("a->gone", "127.0.0.1:0", target, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		return // reset before the handshake finished: refused, as wanted
	}
	defer c.Close()
	cl := &client{c: c, r: bufio.NewReader(c)}
	if _, err := cl.roundTrip("x", time.Second); err == nil {
		t.Fatal("round trip to a dead target succeeded")
	}
}

func TestCloseEndsEverything(t *testing.T) {
	p, err := New("a->b", "127.0.0.1:0", echoServer(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	if _, err := c.roundTrip("a", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	c2 := dial(t, p)
	_, _ = c2.c.Write([]byte("held\n"))
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Close hung")
	}
	if _, err := c.roundTrip("b", time.Second); err == nil {
		t.Fatal("connection alive after Close")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), 200*time.Millisecond); err == nil {
		t.Fatal("listener alive after Close")
	}
	p.Close() // twice is fine
}

func TestModeSwitchUnderLoad(t *testing.T) {
	p := newProxy(t)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				c, err := net.DialTimeout("tcp", p.Addr(), 200*time.Millisecond)
				if err != nil {
					continue
				}
				r := bufio.NewReader(c)
				for j := 0; j < 20; j++ {
					_ = c.SetDeadline(time.Now().Add(50 * time.Millisecond))
					if _, err := c.Write([]byte("ping\n")); err != nil {
						break
					}
					if s, err := r.ReadString('\n'); err != nil {
						break
					} else if s != "ping\n" {
						c.Close()
						errs <- io.ErrUnexpectedEOF
						return
					}
				}
				c.Close()
			}
		}()
	}
	modes := []func(){p.Pass, p.Blackhole, p.Reset, func() { p.SetDelay(5*time.Millisecond, 5*time.Millisecond) }}
	for i := 0; i < 40; i++ {
		modes[i%len(modes)]()
		time.Sleep(10 * time.Millisecond)
	}
	p.Pass()
	close(stop)
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("corrupted stream: %v", err)
		}
	}
}
