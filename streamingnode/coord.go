package streamingnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/redial"
)

// coordPool holds one connection per coordd endpoint and the one calls
// currently go to; a failed call moves every caller on to the next.
type coordPool struct {
	addrs []string
	conns []*grpc.ClientConn
	cur   atomic.Int64
}

func newCoordPool(addrs []string, opts ...grpc.DialOption) (*coordPool, error) {
	p := &coordPool{addrs: addrs}
	for _, a := range addrs {
		c, err := grpc.NewClient(a, append([]grpc.DialOption{redial.Option(0)}, opts...)...)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("streamingnode: coordd endpoint %s: %w", a, err)
		}
		p.conns = append(p.conns, c)
	}
	return p, nil
}

// pick returns the current endpoint's index and connection.
func (p *coordPool) pick() (int, *grpc.ClientConn) {
	i := int(p.cur.Load()) % len(p.conns)
	redial.Wake(p.conns[i]) // every caller retries on its own schedule
	return i, p.conns[i]
}

// failed moves on from endpoint i (unless someone already did).
func (p *coordPool) failed(i int) {
	p.cur.CompareAndSwap(int64(i), int64((i+1)%len(p.conns)))
}

func (p *coordPool) close() {
	for _, c := range p.conns {
		c.Close()
	}
}

// sessionGone reports an answer meaning "this node's session is over":
// unknown node, DOWN, or a stale epoch.
func sessionGone(err error) bool {
	c := status.Code(err)
	return c == codes.NotFound || c == codes.FailedPrecondition
}

// endpointTrouble reports an error worth trying another endpoint for.
func endpointTrouble(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Unknown, codes.Canceled, codes.Internal, codes.Aborted:
		return true
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// tso hands out coordd timestamps from locally held batches. Timestamps it
// returns strictly increase.
type tso struct {
	pool    *coordPool
	batch   uint32
	timeout time.Duration

	mu        sync.Mutex
	next, end uint64 // [next, end) are ours to hand out
	last      uint64
}

var errTSO = errors.New("timestamp allocation failed")

// Next returns a timestamp strictly above every one it returned before.
func (t *tso) Next(ctx context.Context) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next >= t.end {
		if err := t.refill(ctx); err != nil {
			return 0, err
		}
	}
	ts := t.next
	t.next++
	t.last = ts
	return ts, nil
}

// Discard drops the held batch: the next timestamp comes from a fresh
// allocation, which coordd guarantees is above every timestamp issued
// before (in particular above a WAL's last one).
func (t *tso) Discard() {
	t.mu.Lock()
	t.next = t.end
	t.mu.Unlock()
}

func (t *tso) refill(ctx context.Context) error {
	var lastErr error
	for attempt := 0; attempt < 2*len(t.pool.conns)+1; attempt++ {
		if attempt > 0 && !sleepCtx(ctx, 20*time.Millisecond) {
			break
		}
		i, conn := t.pool.pick()
		cctx, cancel := context.WithTimeout(ctx, t.timeout)
		resp, err := coordpb.NewAllocatorClient(conn).AllocTimestamp(cctx, &coordpb.AllocTimestampRequest{Count: t.batch})
		cancel()
		if err != nil {
			lastErr = err
			if endpointTrouble(err) {
				t.pool.failed(i)
				continue
			}
			break
		}
		if resp.Count == 0 || resp.First <= t.last {
			lastErr = fmt.Errorf("coordd returned timestamps [%d, +%d), not above %d", resp.First, resp.Count, t.last)
			continue
		}
		t.next, t.end = resp.First, resp.First+uint64(resp.Count)
		return nil
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	return fmt.Errorf("%w: %v", errTSO, lastErr)
}
