package nodehealth

import (
	"testing"
	"time"

	"github.com/coordd/coordd/controller/controllertest"
)

// The rule: two intervals, at least a tenth of the TTL; half the TTL
// without a declared interval. At the defaults (TTL 10s, interval 1s) a
// node is silent after 2s, well inside the 3s the status page promises.
func TestSilentAfterRule(t *testing.T) {
	for _, tc := range []struct {
		ttl, interval, want time.Duration
	}{
		{10 * time.Second, time.Second, 2 * time.Second},        // the defaults
		{10 * time.Second, 0, 5 * time.Second},                  // not declared: half the TTL
		{10 * time.Second, 100 * time.Millisecond, time.Second}, // fast beats: a tenth of the TTL
		{2 * time.Second, 250 * time.Millisecond, 500 * time.Millisecond},
		{2 * time.Second, time.Second, 2 * time.Second}, // reaches the TTL: no silent stage
	} {
		if got := silentAfter(tc.ttl, tc.interval); got != tc.want {
			t.Errorf("silentAfter(ttl %v, interval %v) = %v, want %v", tc.ttl, tc.interval, got, tc.want)
		}
	}
}

// The tracker judges a node by the interval its heartbeats declare, read
// against its injected clock: silent once the last beat is older than two
// intervals, not before; a new heartbeat ends it; a later heartbeat that
// declares nothing keeps the interval known.
func TestTrackerSilenceFollowsTheClock(t *testing.T) {
	clock := controllertest.NewClock()
	leader := controllertest.NewLeader(t, clock, 3)
	tr := New(leader, Config{TTL: 10 * time.Second, Clock: clock})
	n := register(t, leader, "10.0.0.1:1001")
	silent := func() bool {
		age, ok := tr.LastSeen(n.Id)
		return ok && age > tr.SilentAfter(n.Id)
	}
	if got := tr.SilentAfter(n.Id); got != 5*time.Second {
		t.Fatalf("before any heartbeat SilentAfter = %v, want half the TTL", got)
	}
	tr.HeartbeatHeld(n.Id, n.Epoch, rv(n), nil, time.Second)
	if got := tr.SilentAfter(n.Id); got != 2*time.Second {
		t.Fatalf("SilentAfter = %v after a 1s interval was declared, want 2s", got)
	}
	clock.Advance(2 * time.Second)
	if silent() {
		t.Fatal("silent exactly at the threshold")
	}
	clock.Advance(time.Millisecond)
	if !silent() {
		t.Fatal("not silent 2.001s after the last heartbeat")
	}
	if !tr.Healthy(n.Id) {
		t.Fatal("a silent node within the TTL stopped being healthy: silence is a warning, the TTL decides")
	}
	tr.HeartbeatHeld(n.Id, n.Epoch, rv(n), nil, 0)
	if silent() || tr.SilentAfter(n.Id) != 2*time.Second {
		t.Fatalf("after a heartbeat: silent %v, SilentAfter %v (the declared interval must be kept)", silent(), tr.SilentAfter(n.Id))
	}
}
