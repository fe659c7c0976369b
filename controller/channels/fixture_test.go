package channels

import (
	"context"
	"sync"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/controllertest"
)

const (
	testCluster = "by-dev"
	testP0      = "by-dev-rootcoord-dml_0"
	testP1      = "by-dev-rootcoord-dml_1"
)

// fakeBroadcasts records the broadcasts it is handed and answers with
// answer (default: a result, nothing installed).
type fakeBroadcasts struct {
	mu     sync.Mutex
	reqs   []broadcaster.Request
	answer func(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error)
}

func (f *fakeBroadcasts) Broadcast(ctx context.Context, c broadcaster.Checked) (broadcaster.Result, error) {
	req := c.Request()
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		return broadcaster.Result{BroadcastID: 1}, nil
	}
	return answer(ctx, req)
}

func (f *fakeBroadcasts) requests() []broadcaster.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]broadcaster.Request(nil), f.reqs...)
}

// fakeRebalancer counts triggers; with report set it also reports.
type fakeRebalancer struct {
	mu       sync.Mutex
	triggers int
}

func (r *fakeRebalancer) Trigger() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.triggers++
}

func (r *fakeRebalancer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.triggers
}

// reportingFake is a rebalancer that reports with rebalance.
type reportingFake struct {
	fakeRebalancer
	rebalance func(ctx context.Context) (balancer.Report, error)
}

func (r *reportingFake) Rebalance(ctx context.Context) (balancer.Report, error) {
	return r.rebalance(ctx)
}

// newTestService is a service over a fake leader at term 1 whose state has
// streaming initialized (two PChannels).
func newTestService(t *testing.T, b Broadcaster, r Rebalancer) (*Service, *controllertest.Leader) {
	t.Helper()
	l := controllertest.NewLeader(t, controllertest.NewClock(), 1)
	l.MustPropose(t, &logpb.InitStreaming{ClusterId: testCluster, Pchannels: []string{testP0, testP1}})
	return New(l, b, r, nil), l
}
