package balancer

import (
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/testutil"
)

// TestRunRestsAfterACostlyDecide: a Decide woken by a health change that
// took a second (the fake clock moves while it reads health) is followed
// by ten seconds in which the next change waits; then Decide runs.
// Without the pacing, channel-record changes arriving several times a
// second (new collections) run Decide back to back at Milvus-max's size.
func TestRunRestsAfterACostlyDecide(t *testing.T) {
	h := newHarness(t, nil)
	a := h.addNode("10.0.0.1:1")
	h.addNode("10.0.0.2:1")
	stop := h.runBalancer()
	defer stop()
	h.eventually("initial assignment", func() bool {
		for _, p := range h.leader.State().PChannels() {
			if p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
				return false
			}
		}
		return true
	})
	quiet := func() uint64 {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return h.b.quiet
	}
	testutil.Eventually(t, "a round that changes nothing", func() bool { return quiet() > 0 })

	// A Decide that takes a second; Decide asks once per UP node (two).
	calls0 := h.health.Calls()
	h.health.setOnHealthy(func() { h.clock.Advance(time.Second) })
	h.health.Set(a, true)
	testutil.Eventually(t, "the costly Decide", func() bool { return h.health.Calls() >= calls0+2 })

	// The next change waits out the rest.
	calls1 := h.health.Calls()
	h.health.Set(a, true)
	controllertest.WaitForTimers(t, h.clock, 2) // the interval timer and the rest
	h.clock.Advance(9 * time.Second)
	controllertest.WaitForTimers(t, h.clock, 2) // still resting
	if got := h.health.Calls(); got != calls1 {
		t.Fatalf("Decide ran during the rest (%d Healthy calls, want %d)", got, calls1)
	}
	h.clock.Advance(time.Second)
	testutil.Eventually(t, "Decide after the rest", func() bool { return h.health.Calls() > calls1 })
}
