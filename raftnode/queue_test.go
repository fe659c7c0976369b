package raftnode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

func queued(t *testing.T) *proposal {
	t.Helper()
	c, err := commands.New(&logpb.ReserveIDs{Count: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	return &proposal{cmd: c, done: make(chan proposalResult, 1)}
}

// TestProposalQueueFailsFast: a caller's proposal is admitted while fewer
// than max wait and refused at once (typed, nothing queued) past it; a
// refusal is counted; room made by the batcher admits again; a leader
// routine's proposal is admitted past the bound; depth never counts a
// refused or abandoned proposal.
func TestProposalQueueFailsFast(t *testing.T) {
	const max = 3
	q := newProposalQueue(max)
	closed := make(chan struct{})
	ctx := context.Background()
	for i := 0; i < max; i++ {
		if err := q.offer(ctx, queued(t), false, closed); err != nil {
			t.Fatalf("offer %d of %d: %v", i+1, max, err)
		}
	}
	if s := q.stats(); s.Pending != max || s.Rejected != 0 || s.Max != max {
		t.Fatalf("stats %+v after %d offers, want %d pending, none rejected", s, max, max)
	}

	// Full: refused at once, even with a context that would let it wait.
	wctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	err := q.offer(wctx, queued(t), false, closed)
	var oe *OverloadedError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOverloaded) {
		t.Fatalf("offer past the bound = %v, want *OverloadedError wrapping ErrOverloaded", err)
	}
	if oe.Pending != max || oe.Max != max || oe.RetryAfter <= 0 {
		t.Fatalf("refusal %+v, want pending %d, max %d and a retry hint", oe, max, max)
	}
	if s := q.stats(); s.Pending != max || s.Rejected != 1 || len(q.ch) != max {
		t.Fatalf("stats %+v (channel %d) after a refusal, want %d pending, 1 rejected", s, len(q.ch), max)
	}

	// The batcher takes one: room for one more.
	<-q.ch
	q.taken()
	if err := q.offer(ctx, queued(t), false, closed); err != nil {
		t.Fatalf("offer after the batcher took one: %v", err)
	}
	if err := q.offer(ctx, queued(t), false, closed); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("offer when full again = %v, want ErrOverloaded", err)
	}

	// A leader routine's proposal is never refused for the bound.
	for i := 0; i < 2; i++ {
		if err := q.offer(ctx, queued(t), commands.Prepare(commands.Command{}, commands.AsRoutine()).Routine, closed); err != nil {
			t.Fatalf("routine offer %d past the bound: %v", i, err)
		}
	}
	if s := q.stats(); s.Pending != max+2 || s.Rejected != 2 {
		t.Fatalf("stats %+v, want %d pending and 2 rejected", s, max+2)
	}
	if commands.Prepare(commands.Command{}).Routine {
		t.Fatal("a plain proposal is marked as a leader routine's")
	}

	// A waiting routine proposal that gives up, or meets shutdown, leaves
	// nothing counted. Fill the channel's routine reserve first.
	for len(q.ch) < cap(q.ch) {
		if err := q.offer(ctx, queued(t), true, closed); err != nil {
			t.Fatal(err)
		}
	}
	before := q.stats().Pending
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := q.offer(cctx, queued(t), true, closed); !errors.Is(err, context.Canceled) {
		t.Fatalf("routine offer on a full channel with a cancelled context = %v", err)
	}
	close(closed)
	if err := q.offer(ctx, queued(t), true, closed); !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("routine offer on a full channel at shutdown = %v", err)
	}
	if got := q.stats().Pending; got != before {
		t.Fatalf("pending %d after two abandoned offers, want %d", got, before)
	}
}
