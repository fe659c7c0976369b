package broadcaster

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/testutil"
	"github.com/coordd/coordd/vocab"
)

// A step that appends some of its targets restarts the task's backoff: the
// targets it missed are retried after BackoffInitial, not after the
// doubled delay of the failures before it. Old code: after a streaming
// node restarted at the same address, the one append still failing
// (the leader's connection had not redialled yet) inherited seconds of
// backoff, and no broadcast on the task's key succeeded in the 5 s after
// the heal (jepsen channels-3-r04 seed 676910510).
func TestProgressRestartsTheBackoff(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.BackoffInitial, c.BackoffMax = time.Second, time.Hour })
	h.run(h.m, testTerm)
	a, b := h.cch, h.vch(1, 100)
	if vocab.PChannelOf(a) == vocab.PChannelOf(b) {
		t.Fatalf("the targets share pchannel %s", vocab.PChannelOf(a))
	}
	var aDown, bDown atomic.Bool
	aDown.Store(true)
	bDown.Store(true)
	h.app.setOnAppend(func(c appendCall) error {
		if (c.VChannel == a && aDown.Load()) || (c.VChannel == b && bDown.Load()) {
			return status.Error(codes.Unavailable, "connection refused")
		}
		return nil
	})
	ch := broadcastAsync(ctxTimeout(t, 20*time.Second), h.m, Request{MessageType: "CreateIndex", VChannels: []string{a, b}})
	calls := func() int { return len(h.app.Calls()) }
	// armed is the delay the task waits before its next step (0 while it
	// is not waiting). An Unavailable node counts as an ownership failure
	// (assignWait: an assignment change also wakes it), with the same
	// backoff.
	armed := func() time.Duration {
		ts := h.m.current()
		ts.mu.Lock()
		defer ts.mu.Unlock()
		for _, tk := range ts.tasks {
			if (tk.state == stateBackoff || tk.state == stateAssignWait) && tk.timer != nil {
				return tk.backoff
			}
		}
		return 0
	}
	// Five failed steps: the backoff doubles to 16 s.
	for step := 1; step <= 5; step++ {
		want := time.Second << (step - 1)
		testutil.Eventually(t, fmt.Sprintf("failed step %d in backoff", step), func() bool { return calls() == 2*step && armed() == want })
		h.clock.Advance(want)
	}
	aDown.Store(false) // the sixth step appends a, and fails on b again
	testutil.Eventually(t, "the step that appends a in backoff", func() bool { return calls() == 12 && armed() != 0 })
	if d := armed(); d != time.Second {
		t.Fatalf("after a step that appended a target the task waits %v, want BackoffInitial (1s)", d)
	}
	bDown.Store(false)
	h.clock.Advance(time.Second)
	if r := h.wait(ch); r.err != nil {
		t.Fatalf("Broadcast: %v", r.err)
	}
}
