package httpgateway

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// limitedFixture is a LimitedListener on 127.0.0.1 whose accepted
// connections arrive on accepted.
type limitedFixture struct {
	l        *LimitedListener
	accepted chan *trackedConn
}

func newLimited(t *testing.T, lim ConnLimits) *limitedFixture {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &limitedFixture{l: LimitListener(raw, lim), accepted: make(chan *trackedConn, 16)}
	t.Cleanup(func() { raw.Close() })
	go func() {
		for {
			c, err := f.l.Accept()
			if err != nil {
				return
			}
			f.accepted <- c.(*trackedConn)
		}
	}()
	return f
}

// dial opens a client connection and, unless refused, waits for the
// server side of it.
func (f *limitedFixture) dial(t *testing.T) (client net.Conn, server *trackedConn) {
	t.Helper()
	c, err := net.Dial("tcp", f.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	select {
	case s := <-f.accepted:
		return c, s
	case <-time.After(300 * time.Millisecond):
		return c, nil // refused: the listener answered it itself
	}
}

// closedByServer reports whether the server closed c, with what it sent.
func closedByServer(t *testing.T, c net.Conn) (bool, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false, string(b)
	}
	return true, string(b)
}

func TestLimitedListenerEvictsLongestWaitingUntrusted(t *testing.T) {
	f := newLimited(t, ConnLimits{Max: 4, MaxUnauthenticated: 2})
	c1, s1 := f.dial(t)
	time.Sleep(2 * time.Millisecond)
	c2, _ := f.dial(t)
	time.Sleep(2 * time.Millisecond)
	_, s3 := f.dial(t) // the third untrusted connection evicts the first
	if s3 == nil {
		t.Fatal("the new connection was refused instead of evicting a waiting one")
	}
	if closed, _ := closedByServer(t, c1); !closed {
		t.Fatal("the longest-waiting connection was not evicted")
	}
	if f.l.Evicted() != 1 || f.l.Open() != 2 || f.l.Unauthenticated() != 2 {
		t.Fatalf("evicted %d, open %d, unauthenticated %d; want 1, 2, 2", f.l.Evicted(), f.l.Open(), f.l.Unauthenticated())
	}
	_ = s1
	_ = c2
}

func TestLimitedListenerKeepsWorkingAndTrustedConnections(t *testing.T) {
	f := newLimited(t, ConnLimits{Max: 3, MaxUnauthenticated: 2})
	cw, sw := f.dial(t)
	sw.beginWork() // a handler is running for it: never evicted
	time.Sleep(2 * time.Millisecond)
	ct, st := f.dial(t)
	st.beginWork()
	st.endWork(true) // it carried an authenticated request
	time.Sleep(2 * time.Millisecond)
	cu, _ := f.dial(t)
	if f.l.Open() != 3 || f.l.Unauthenticated() != 2 {
		t.Fatalf("open %d, unauthenticated %d; want 3, 2", f.l.Open(), f.l.Unauthenticated())
	}
	// Full: the untrusted waiting connection makes room, not the working
	// or the trusted one.
	_, s4 := f.dial(t)
	if s4 == nil {
		t.Fatal("refused while an untrusted connection was waiting")
	}
	if closed, _ := closedByServer(t, cu); !closed {
		t.Fatal("the untrusted waiting connection was not evicted")
	}
	// s4 carries an authenticated request. Full, with no untrusted
	// connection waiting: the trusted idle one that waited longest makes
	// room.
	s4.beginWork()
	s4.endWork(true)
	_, s5 := f.dial(t)
	if s5 == nil {
		t.Fatal("refused while a trusted connection was idle")
	}
	if closed, _ := closedByServer(t, ct); !closed {
		t.Fatal("the trusted idle connection was not evicted when nothing else could make room")
	}
	s4.beginWork()
	s5.beginWork()
	// Every slot working: a new connection is answered 503 and closed.
	cr, sr := f.dial(t)
	if sr != nil {
		t.Fatal("a connection was admitted while every slot was working")
	}
	closed, got := closedByServer(t, cr)
	if !closed || !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "too many open connections") {
		t.Fatalf("refused connection got %q (closed %v)", got, closed)
	}
	if closed, _ := closedByServer(t, cw); closed {
		t.Fatal("a working connection was evicted")
	}
	if f.l.Refused() != 1 {
		t.Fatalf("refused %d, want 1", f.l.Refused())
	}
}
