package conncache

import (
	"errors"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestIdleConnectionsAreClosed: a connection unused for longer than the
// idle limit is dropped at the next Get of another address; a used one is
// kept and reused.
func TestIdleConnectionsAreClosed(t *testing.T) {
	clk := &clock{now: time.Unix(1000, 0)}
	c := New(time.Minute, clk.Now)
	defer c.Close()
	a1, err := c.Get("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get("127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	clk.advance(50 * time.Second)
	if again, _ := c.Get("127.0.0.1:1"); again != a1 {
		t.Fatal("a cached connection was not reused")
	}
	clk.advance(50 * time.Second) // :2 idle 100s, :1 idle 50s
	if _, err := c.Get("127.0.0.1:3"); err != nil {
		t.Fatal(err)
	}
	if n := c.Len(); n != 2 {
		t.Fatalf("%d connections cached, want 2 (the idle one closed)", n)
	}
	c.Close()
	if _, err := c.Get("127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}
