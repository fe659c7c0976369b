package channels

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/controller/balancer"
	"github.com/coordd/coordd/leadership"
)

// TestRebalance: a reporting balancer's report is returned; one that does
// not finish in time is reported as still running; a balancer that cannot
// report is only triggered; a node that does not lead is refused.
func TestRebalance(t *testing.T) {
	moved := balancer.Report{Moves: []balancer.Move{{PChannel: testP0, From: 1, To: 2, Term: 3}}}
	rb := &reportingFake{rebalance: func(context.Context) (balancer.Report, error) { return moved, nil }}
	s, l := newTestService(t, nil, rb)
	res, err := s.Rebalance(l.Deadline())
	if err != nil || !res.RoundDone || len(res.Moves) != 1 || res.Moves[0] != moved.Moves[0] {
		t.Fatalf("Rebalance = %+v, %v; want the report", res, err)
	}

	// The round outlives the wait, and the answer is only looked at after
	// the caller's own deadline passed too (a loaded machine): it is still
	// "the round still runs", not the caller's deadline error.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rb.rebalance = func(wctx context.Context) (balancer.Report, error) {
		<-wctx.Done()
		<-ctx.Done()
		return balancer.Report{}, wctx.Err()
	}
	res, err = s.Rebalance(ctx)
	if err != nil || res.RoundDone || !strings.Contains(res.Reason, "it still runs") {
		t.Fatalf("slow round = %+v, %v; want a reason saying it still runs", res, err)
	}

	plain := &fakeRebalancer{}
	s2, _ := newTestService(t, nil, plain)
	res, err = s2.Rebalance(l.Deadline())
	if err != nil || res.RoundDone || plain.count() != 1 || !strings.Contains(res.Reason, "cannot report") {
		t.Fatalf("non-reporting balancer = %+v, %v (%d triggers)", res, err, plain.count())
	}

	l.SetEstablished(0)
	if _, err := s.Rebalance(context.Background()); !errors.Is(err, leadership.ErrNotEstablished) {
		t.Fatalf("not leading: %v, want ErrNotEstablished", err)
	}
}
