package broadcaster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/testutil"
)

// queueingLeader says "queued" (commands.NotifyQueued) as raftnode does,
// after the fake applied the command, and, for a FastAck, holds the ack's
// answer until a CompleteBroadcast has been proposed meanwhile (or a
// bound passes): the completion must not wait for the ack's round.
type queueingLeader struct {
	*controllertest.Leader
	completes        atomic.Int64
	earlyCompletions atomic.Int64 // completions proposed while an ack's answer was held
	holding          atomic.Bool
}

func (q *queueingLeader) Propose(ctx context.Context, c commands.Command) (*logpb.Result, error) {
	if c.Type == commands.TypeCompleteBroadcast {
		q.completes.Add(1)
		if q.holding.Load() {
			q.earlyCompletions.Add(1)
		}
	}
	res, err := q.Leader.Propose(ctx, c)
	if c.Type != commands.TypeAckBroadcast || err != nil {
		commands.NotifyQueued(ctx)
		return res, err
	}
	before := q.completes.Load()
	q.holding.Store(true)
	commands.NotifyQueued(ctx)
	deadline := time.Now().Add(testutil.Timeout(2 * time.Second))
	for q.completes.Load() == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // not a wait: bounded hold of the ack's answer
	}
	q.holding.Store(false)
	return res, err
}

// TestCompletionIsProposedBehindTheLastAck: the CompleteBroadcast of a
// FastAck task is proposed as soon as the ack that acks its last targets
// is queued, not a raft round later, and the task completes once.
func TestCompletionIsProposedBehindTheLastAck(t *testing.T) {
	h := newHarness(t, nil)
	q := &queueingLeader{Leader: h.leader}
	m, err := New(q, h.app, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	h.run(m, testTerm)
	res, err := m.Broadcast(ctxTimeout(t, 10*time.Second), Request{MessageType: "CreatePartition",
		ResourceKeys: []*logpb.ResourceKey{collKey("db", "c", false)}, VChannels: []string{h.vch(1, 100), h.vch(2, 100)}})
	if err != nil {
		t.Fatalf("Broadcast: %v", err)
	}
	if bt := taskOf(t, h.leader, res.BroadcastID); bt.State != logpb.BroadcastState_BROADCAST_TOMBSTONE {
		t.Fatalf("task %v", bt)
	}
	if n := q.earlyCompletions.Load(); n != 1 {
		t.Fatalf("%d completions proposed while the last ack was in flight, want 1", n)
	}
	if n := len(appliedOf[*logpb.CompleteBroadcast](h.leader)); n != 1 {
		t.Fatalf("%d completions applied, want 1", n)
	}
}
