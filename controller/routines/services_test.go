package routines

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/fsm"
)

// fakeBroadcasts counts the broadcasts the services hand it.
type fakeBroadcasts struct{ calls int }

var errFake = errors.New("the fake broadcaster")

func (f *fakeBroadcasts) Broadcast(context.Context, broadcaster.Checked) (broadcaster.Result, error) {
	f.calls++
	return broadcaster.Result{}, errFake
}
func (f *fakeBroadcasts) Ack(context.Context, broadcaster.Ack) error    { return nil }
func (f *fakeBroadcasts) Retry(uint64) error                            { return nil }
func (f *fakeBroadcasts) Abandon(context.Context, uint64, string) error { return nil }
func (f *fakeSessions) HeartbeatHeld(uint64, uint64, fsm.AssignmentVersion, map[string]int64, time.Duration) {
}
func (f *fakeSessions) LastSeen(uint64) (time.Duration, bool) { return time.Second, true }
func (f *fakeSessions) TTL() time.Duration                    { return f.ttl }
func (f *fakeSessions) SilentAfter(uint64) time.Duration      { return f.ttl }

type fakeSessions struct{ ttl time.Duration }

// New builds the request services over its controllers: without a
// broadcaster the services have none (FlushAll says so), and the set's
// view is the tracker it built.
func TestNewBuildsTheServices(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 3)
	set, err := New(l, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if set.DataPath == nil || set.Channels == nil {
		t.Fatalf("services: data path %v, channels %v", set.DataPath, set.Channels)
	}
	if set.Broadcasts != nil || set.Rebalancer != nil {
		t.Errorf("without a broadcaster or balancer: broadcasts %v, rebalancer %v; want none", set.Broadcasts, set.Rebalancer)
	}
	if set.Sessions != set.Health {
		t.Errorf("sessions %v; want the set's tracker", set.Sessions)
	}
	if _, err := set.DataPath.FlushAll(context.Background()); !errors.Is(err, datapath.ErrNoBroadcaster) {
		t.Errorf("FlushAll without a broadcaster: %v; want ErrNoBroadcaster", err)
	}
}

// Doubles replace the controllers in the services' view: the data path's
// FlushAll goes to the fake broadcaster, and the set hands the fakes on.
func TestDoublesStandInForTheControllers(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 3)
	fb, fs := &fakeBroadcasts{}, &fakeSessions{ttl: 7 * time.Second}
	set, err := New(l, Config{Doubles: Doubles{Broadcasts: fb, Sessions: fs}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if set.Broadcasts != fb || set.Sessions != fs {
		t.Fatalf("set's view: broadcasts %v, sessions %v; want the doubles", set.Broadcasts, set.Sessions)
	}
	if _, err := set.DataPath.FlushAll(context.Background()); !errors.Is(err, errFake) || fb.calls != 1 {
		t.Errorf("FlushAll: %v after %d broadcasts; want the fake's error after 1", err, fb.calls)
	}
}
