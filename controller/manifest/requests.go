package manifest

import (
	"context"
	"fmt"
	"sync"
)

// requestGate serialises the calls that carry one request ID. Before
// pipelining, the segment lock did that: a repeat of a request (a client
// retrying after an unknown outcome) waited for the first call's commit
// and then found its recorded answer. With the lock released once a
// publication is queued, the repeat could build a second revision and
// propose it under the same ID while the first was still in flight, and
// the FSM refuses an ID reused for a different body. So a call waits here
// while another call with its ID runs, and then finds that call's answer
// (Committer.recorded).
type requestGate struct {
	mu      sync.Mutex
	running map[string]chan struct{} // closed when that call returns
}

func newRequestGate() *requestGate { return &requestGate{running: map[string]chan struct{}{}} }

// enter waits until no other call with id runs and marks this one
// running; leave ends it. An empty id never waits.
func (g *requestGate) enter(ctx context.Context, id string) (leave func(), err error) {
	if id == "" {
		return func() {}, nil
	}
	for {
		g.mu.Lock()
		done, busy := g.running[id]
		if !busy {
			mine := make(chan struct{})
			g.running[id] = mine
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				delete(g.running, id)
				g.mu.Unlock()
				close(mine)
			}, nil
		}
		g.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the earlier call with request ID %q: %w", id, ctx.Err())
		}
	}
}
