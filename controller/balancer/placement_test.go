package balancer

import (
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
)

// These tests pin balanced placement from the first minute
// (docs/semantics.md#balance-policy): a node that joins — at start, after a
// restart, after an undrain — gets its share within a few rounds, while
// --min-rebalance-interval still stops moves away from a balanced placement.
// The clock is the harness's fake one; "seconds" are fake-clock steps.

// within fails unless every node in want holds want[node]±1 channels.
func within(t *testing.T, got map[uint64]int, want map[uint64]int) {
	t.Helper()
	for n, w := range want {
		if d := got[n] - w; d < -1 || d > 1 {
			t.Fatalf("placement %v, want %v ±1", got, want)
		}
	}
}

// Fresh start: the first node registers and takes every channel; the second
// registers a second later. Within one settle (a few rounds, no clock
// advance past the interval) the two hold half each.
func TestPlacementFreshStartTwoNodes(t *testing.T) {
	h := newHarness(t, nil)
	h.bootstrap()
	a := h.addNode("10.0.0.1:1001")
	h.settle()
	if got := h.placement(); got[a] != 16 {
		t.Fatalf("placement %v, want all on the only node", got)
	}
	h.clock.Advance(time.Second)
	b := h.addNode("10.0.0.2:1002")
	h.settle()
	within(t, h.placement(), map[uint64]int{a: 8, b: 8})
}

// A third node joining later gets its share (16/3: 5 or 6) at once, long
// before the interval has passed.
func TestPlacementThirdNodeGetsItsShare(t *testing.T) {
	h := newHarness(t, nil)
	h.bootstrap()
	a := h.addNode("10.0.0.1:1001")
	b := h.addNode("10.0.0.2:1002")
	h.settle()
	h.clock.Advance(30 * time.Second)
	c := h.addNode("10.0.0.3:1003")
	h.settle()
	got := h.placement()
	within(t, got, map[uint64]int{a: 5, b: 5, c: 5})
	if got[c] < 5 {
		t.Fatalf("placement %v: the new node holds fewer than its floor share", got)
	}
}

// Undrain: a drained node is emptied; undrained, it is refilled at once.
func TestPlacementAfterUndrain(t *testing.T) {
	h := newHarness(t, nil)
	h.bootstrap()
	a := h.addNode("10.0.0.1:1001")
	b := h.addNode("10.0.0.2:1002")
	h.settle()
	h.leader.MustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: b, Draining: true})
	h.settle()
	if got := h.placement(); got[a] != 16 {
		t.Fatalf("placement %v after drain, want all on %d", got, a)
	}
	h.clock.Advance(time.Second)
	h.leader.MustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: b, Draining: false})
	h.settle()
	within(t, h.placement(), map[uint64]int{a: 8, b: 8})
}

// Repeated join/leave of one node moves only what each event needs: the
// leaving node's channels, and the returning node's share; with membership
// stable, rounds move nothing, before and after the interval.
func TestPlacementJoinLeaveDoesNotFlap(t *testing.T) {
	h := newHarness(t, nil)
	h.bootstrap()
	a := h.addNode("10.0.0.1:1001")
	b := h.addNode("10.0.0.2:1002")
	c := h.addNode("10.0.0.3:1003")
	h.settle()
	terms := func() map[string]int64 {
		out := map[string]int64{}
		for _, p := range h.leader.State().PChannels() {
			out[p.Name] = p.Term
		}
		return out
	}
	movedSince := func(before map[string]int64) int {
		n := 0
		for name, term := range terms() {
			if term != before[name] {
				n++
			}
		}
		return n
	}
	for cycle := 0; cycle < 5; cycle++ {
		h.clock.Advance(2 * time.Second)
		before := terms()
		onC := len(h.channelsOn(c))
		h.health.Set(c, false)
		h.settle()
		if m := movedSince(before); m != onC {
			t.Fatalf("cycle %d: node %d left holding %d channels, %d moved", cycle, c, onC, m)
		}
		within(t, h.placement(), map[uint64]int{a: 8, b: 8})

		h.clock.Advance(2 * time.Second)
		before = terms()
		h.health.Set(c, true)
		h.settle()
		got := h.placement()
		if m := movedSince(before); m != got[c] {
			t.Fatalf("cycle %d: node %d came back and got %d channels, but %d moved", cycle, c, got[c], m)
		}
		within(t, got, map[uint64]int{a: 5, b: 5, c: 5})

		// Stable membership: nothing moves, within the interval.
		before = terms()
		for i := 0; i < 3; i++ {
			h.clock.Advance(10 * time.Second)
			if changed, err := h.round(); changed || err != nil {
				t.Fatalf("cycle %d: a round with stable membership changed=%v err=%v", cycle, changed, err)
			}
		}
		if m := movedSince(before); m != 0 {
			t.Fatalf("cycle %d: %d channels moved with stable membership", cycle, m)
		}
	}
	// Past the interval a balanced placement still stays (tolerance).
	h.clock.Advance(time.Hour)
	if changed, err := h.round(); changed || err != nil {
		t.Fatalf("a round past the interval changed=%v err=%v", changed, err)
	}
}
