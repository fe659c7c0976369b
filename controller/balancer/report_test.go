package balancer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer/policy"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/vocab"
)

// Explain names why a round moves nothing: no nodes, rebalancing off, a
// balanced placement, or a better placement the minimum interval blocks
// (with when the first blocked channel becomes movable).
func TestExplain(t *testing.T) {
	ch := func(i int) string { return vocab.PChannelName(testPrefix, i) }
	// 4 channels, 2/2 over two nodes; collection 100's two VChannels both
	// land on node 1's channels, so a free policy would swap one pair.
	l, ids := planState(t, 4, 2)
	assign(t, l, ch(0), ids[0], true)
	assign(t, l, ch(1), ids[0], true)
	assign(t, l, ch(2), ids[1], true)
	assign(t, l, ch(3), ids[1], true)
	l.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: 100, Count: 2})
	now := controllertest.Epoch.Add(time.Minute)
	cfg := policy.DefaultConfig()
	view := View{State: l.State(), Healthy: healthyOnly(ids...)}

	reason, next := Explain(view, now, policy.VChannelFairName, cfg, nil)
	if !strings.Contains(reason, "--min-rebalance-interval (5m0s)") {
		t.Fatalf("reason %q, want the interval named", reason)
	}
	p, _ := l.State().PChannel(ch(0))
	if want := time.UnixMilli(p.LastAssignMs).Add(5 * time.Minute); !next.Equal(want) {
		t.Fatalf("next move at %v, want %v", next, want)
	}
	// The blocked move is real: past the interval the policy makes it.
	pol := defaultPolicy(t)
	if plan, err := Decide(view, next, pol); err != nil || len(plan.Assignments) == 0 {
		t.Fatalf("at the announced time no move: %v %v", plan.Assignments, err)
	}

	off := cfg
	off.AllowRebalance = false
	if reason, _ := Explain(view, now, policy.VChannelFairName, off, nil); !strings.Contains(reason, "--allow-rebalance=false") {
		t.Fatalf("reason %q, want rebalancing off", reason)
	}
	if reason, _ := Explain(view, now, policy.VChannelFairName, cfg, policy.ErrNoNodes); !strings.Contains(reason, "no healthy streaming node") {
		t.Fatalf("reason %q, want no nodes", reason)
	}

	balanced, ids2 := planState(t, 4, 2)
	assign(t, balanced, ch(0), ids2[0], true)
	assign(t, balanced, ch(1), ids2[1], true)
	assign(t, balanced, ch(2), ids2[0], true)
	assign(t, balanced, ch(3), ids2[1], true)
	reason, next = Explain(View{State: balanced.State(), Healthy: healthyOnly(ids2...)}, now, policy.VChannelFairName, cfg, nil)
	if !strings.Contains(reason, "placement is balanced") || !next.IsZero() {
		t.Fatalf("reason %q next %v, want balanced and no next move", reason, next)
	}
}

// A manual rebalance through Run answers with the moves of its rounds, or
// with the reason nothing moved.
func TestRebalanceReports(t *testing.T) {
	h := newHarness(t, nil)
	h.bootstrap()
	a := h.addNode("10.0.0.1:1001")
	stop := h.runBalancer()
	defer stop()
	h.eventually("all on the only node", func() bool {
		n := 0
		for _, p := range h.leader.State().PChannels() {
			if p.State == logpb.PChannelState_PCHANNEL_ASSIGNED && p.NodeId == a {
				n++
			}
		}
		return n == 16
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := h.b.Rebalance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Moves) != 0 || !strings.Contains(rep.Reason, "balanced") {
		t.Fatalf("one node: report %+v, want nothing moved, balanced", rep)
	}
	// A second node: whichever rounds ran before the request, the answer
	// comes only after a round that changed nothing, so by then the node
	// holds its share; every move reported went from a to b with its term,
	// and a report without moves says why.
	b := h.addNode("10.0.0.2:1002")
	rep, err = h.b.Rebalance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.placement(); got[a] != 8 || got[b] != 8 {
		t.Fatalf("placement %v when the rebalance answered, want 8/8", got)
	}
	if len(rep.Moves) == 0 && rep.Reason == "" {
		t.Fatalf("report %+v: no moves and no reason", rep)
	}
	for _, m := range rep.Moves {
		if m.From != a || m.To != b || m.Term == 0 {
			t.Fatalf("move %+v, want %d → %d with its term", m, a, b)
		}
	}
}
