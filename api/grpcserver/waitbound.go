package grpcserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// boundedCtx bounds a call by the server's maximum wait without paying
// for a timer on calls that never wait: it reports the deadline at once,
// but the real deadline context (a timer and a cancel context) is made
// only when something asks for Done or Err — a handler that blocks on
// raft, a child context. A no-op call answered from memory never does.
// Once the call returns (release) the context is cancelled, as a deferred
// cancel of context.WithTimeout would leave it.
type boundedCtx struct {
	context.Context // the caller's context
	deadline        time.Time

	made atomic.Pointer[context.Context] // the deadline context, once made

	mu       sync.Mutex
	cancel   context.CancelFunc
	released bool
}

// boundWait returns ctx bounded by maxWait and what releases it (nil when
// the caller's own deadline is within maxWait and ctx is kept as it is).
func boundWait(ctx context.Context, maxWait time.Duration) (context.Context, *boundedCtx) {
	d := time.Now().Add(maxWait)
	if cd, ok := ctx.Deadline(); ok && !cd.After(d) {
		return ctx, nil
	}
	b := &boundedCtx{Context: ctx, deadline: d}
	return b, b
}

func (b *boundedCtx) real() context.Context {
	if c := b.made.Load(); c != nil {
		return *c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.made.Load(); c != nil {
		return *c
	}
	c, cancel := context.WithDeadline(b.Context, b.deadline)
	if b.released {
		cancel()
	} else {
		b.cancel = cancel
	}
	b.made.Store(&c)
	return c
}

func (b *boundedCtx) Deadline() (time.Time, bool) { return b.deadline, true }
func (b *boundedCtx) Done() <-chan struct{}       { return b.real().Done() }
func (b *boundedCtx) Err() error                  { return b.real().Err() }

// Value answers from the deadline context once it exists, so a child
// context made from this one registers with its cancellation directly
// (context.WithCancel asks for Done first, which makes it).
func (b *boundedCtx) Value(key any) any {
	if c := b.made.Load(); c != nil {
		return (*c).Value(key)
	}
	return b.Context.Value(key)
}

// release ends the call: the deadline context, made or made later, is
// cancelled (nil-safe).
func (b *boundedCtx) release() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.released = true
	cancel := b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
