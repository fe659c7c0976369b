package balancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer/policy"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/vocab"
)

func pname(i int) string { return vocab.PChannelName(testPrefix, i) }

// snapshotPChannels deep-copies every PChannel record for later comparison.
func snapshotPChannels(h *harness) []*logpb.PChannelRecord {
	var out []*logpb.PChannelRecord
	for _, p := range h.leader.State().PChannels() {
		out = append(out, proto.Clone(p).(*logpb.PChannelRecord))
	}
	return out
}

func samePChannels(t *testing.T, want, got []*logpb.PChannelRecord) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("pchannel count changed: %d -> %d", len(want), len(got))
	}
	for i := range want {
		if !proto.Equal(want[i], got[i]) {
			t.Fatalf("pchannel changed:\nbefore %v\nafter  %v", want[i], got[i])
		}
	}
}

// 1. Bootstrap: InitStreaming with the configured prefix, count and cluster
// ID; a larger count later adds only the missing names.
func TestRunBootstrapsStreamingThenAddsOnlyMissingPChannels(t *testing.T) {
	h := newHarness(t, nil)
	stop := h.runBalancer()
	h.eventually("streaming initialized", func() bool {
		return h.leader.State().StreamingInitialized()
	})
	// No streaming node: the rounds fail with ErrNoNodes.
	h.eventually("round error without nodes", func() bool {
		return h.b.LastError() == policy.ErrNoNodes.Error()
	})
	stop()
	h.checkRoutineDecisions()

	st := h.leader.State()
	if got := st.ChannelsMeta().ClusterId; got != testClusterID {
		t.Fatalf("cluster id %q, want %q", got, testClusterID)
	}
	if got, want := st.CChannel(), vocab.CChannelName(pname(0)); got != want {
		t.Fatalf("cchannel %q, want %q", got, want)
	}
	inits := appliedOf[*logpb.InitStreaming](h.leader)
	if len(inits) != 1 {
		t.Fatalf("%d InitStreaming commands, want 1", len(inits))
	}
	var want []string
	for i := 0; i < 16; i++ {
		want = append(want, pname(i))
	}
	if !slices.Equal(inits[0].Pchannels, want) || inits[0].ClusterId != testClusterID {
		t.Fatalf("InitStreaming %v, want cluster %s and %v", inits[0], testClusterID, want)
	}
	if st.PChannelCount() != 16 {
		t.Fatalf("%d pchannels, want 16", st.PChannelCount())
	}
	for _, p := range st.PChannels() {
		if p.State != logpb.PChannelState_PCHANNEL_UNINITIALIZED || p.Term != 1 {
			t.Fatalf("%s is %s at term %d, want UNINITIALIZED at 1", p.Name, p.State, p.Term)
		}
	}
	if len(appliedOf[*logpb.AddPChannels](h.leader)) != 0 {
		t.Fatalf("AddPChannels proposed with nothing missing")
	}

	// A new leader (or restart) configured with more pchannels.
	cfg := h.cfg
	cfg.PChannels = 20
	b2, err := New(h.leader, h.health, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b2
	stop = h.runBalancer()
	h.eventually("20 pchannels", func() bool { return h.leader.State().PChannelCount() == 20 })
	stop()
	adds := appliedOf[*logpb.AddPChannels](h.leader)
	if len(adds) != 1 {
		t.Fatalf("%d AddPChannels commands, want 1", len(adds))
	}
	if want := []string{pname(16), pname(17), pname(18), pname(19)}; !slices.Equal(adds[0].Pchannels, want) {
		t.Fatalf("AddPChannels %v, want only the missing %v", adds[0].Pchannels, want)
	}
	if len(appliedOf[*logpb.InitStreaming](h.leader)) != 1 {
		t.Fatalf("InitStreaming proposed again")
	}
	// Nothing missing: no command at all.
	before := len(h.leader.Applied())
	if err := b2.ensurePChannels(context.Background(), b2.leader); err != nil {
		t.Fatal(err)
	}
	if len(h.leader.Applied()) != before {
		t.Fatalf("ensurePChannels proposed with nothing missing")
	}
}

// More pchannels than one command may carry are created in several
// commands, and assigned over several rounds.
func TestLargePChannelCountIsChunked(t *testing.T) {
	n := vocab.MaxPChannelsPerCmd + 5
	h := newHarness(t, func(c *Config) { c.PChannels = n })
	h.bootstrap()
	if got := h.leader.State().PChannelCount(); got != n {
		t.Fatalf("%d pchannels, want %d", got, n)
	}
	inits, adds := appliedOf[*logpb.InitStreaming](h.leader), appliedOf[*logpb.AddPChannels](h.leader)
	if len(inits) != 1 || len(inits[0].Pchannels) != vocab.MaxPChannelsPerCmd || len(adds) != 1 || len(adds[0].Pchannels) != 5 {
		t.Fatalf("want InitStreaming with %d names then AddPChannels with 5; got %d inits, %d adds", vocab.MaxPChannelsPerCmd, len(inits), len(adds))
	}
	if h.leader.State().CChannel() != vocab.CChannelName(pname(0)) {
		t.Fatalf("cchannel %q", h.leader.State().CChannel())
	}

	a := h.addNode("10.0.0.1:1001")
	h.settle()
	if got := h.placement(); got[a] != n {
		t.Fatalf("placement %v, want all %d on node %d", got, n, a)
	}
	assigns := appliedOf[*logpb.AssignPChannels](h.leader)
	if len(assigns) != 2 || len(assigns[0].Assignments) != vocab.MaxPChannelsPerCmd || len(assigns[1].Assignments) != 5 {
		t.Fatalf("want two AssignPChannels commands (%d + 5 assignments), got %d", vocab.MaxPChannelsPerCmd, len(assigns))
	}
}

func setupTwoNodes(t *testing.T, mutate func(*Config)) (h *harness, a, b uint64) {
	t.Helper()
	h = newHarness(t, mutate)
	h.bootstrap()
	a = h.addNode("10.0.0.1:1001")
	b = h.addNode("10.0.0.2:1002")
	return h, a, b
}

// 2. From scratch: every channel ASSIGNED, 8/8, term 2; one Assign per
// channel with the new term, the leader's term and the FSM's address.
func TestFromScratchAssignsEveryChannelOnce(t *testing.T) {
	h, a, b := setupTwoNodes(t, nil)
	h.settle()
	if got := h.placement(); got[a] != 8 || got[b] != 8 || len(got) != 2 {
		t.Fatalf("placement %v, want 8/8 on %d and %d", got, a, b)
	}
	calls := h.client.Calls()
	if len(calls) != 16 {
		t.Fatalf("%d calls, want 16 assigns: %v", len(calls), calls)
	}
	for _, p := range h.leader.State().PChannels() {
		if p.Term != 2 {
			t.Fatalf("%s at term %d, want 2", p.Name, p.Term)
		}
		if p.LastAssignMs != h.clock.Now().UnixMilli() {
			t.Fatalf("%s last assign %d, want %d", p.Name, p.LastAssignMs, h.clock.Now().UnixMilli())
		}
		cs := callsFor(calls, p.Name)
		want := rpcCall{Op: "assign", Addr: h.node(p.NodeId).Address, PChannel: p.Name, Term: 2, Mode: logpb.AccessMode_ACCESS_RW, CoordTerm: testTerm}
		if len(cs) != 1 || cs[0] != want {
			t.Fatalf("calls for %s: %v, want [%v]", p.Name, cs, want)
		}
	}
	// Settled: another round changes nothing and calls nobody.
	h.client.Reset()
	if changed, err := h.round(); changed || err != nil {
		t.Fatalf("settled round: changed=%v err=%v", changed, err)
	}
	if c := h.client.Calls(); len(c) != 0 {
		t.Fatalf("settled round made calls %v", c)
	}
}

// checkTwoPhase installs a client callback that records every call made
// while the FSM does not already show the channel ASSIGNING at the call's
// term (assign) or with the removed placement in its histories (remove).
func checkTwoPhase(h *harness) (violations func() []string) {
	var mu sync.Mutex
	var bad []string
	h.client.setOnCall(func(c rpcCall) error {
		// Runs on the balancer's goroutines: no t.Fatal here.
		st := h.leader.State()
		addr := func(id uint64) string {
			n, _ := st.StreamingNode(id)
			return n.GetAddress()
		}
		p, ok := st.PChannel(c.PChannel)
		var problem string
		switch {
		case !ok:
			problem = "unknown channel"
		case p.State != logpb.PChannelState_PCHANNEL_ASSIGNING:
			problem = fmt.Sprintf("channel is %s", p.State)
		case c.Op == "assign" && (p.Term != c.Term || addr(p.NodeId) != c.Addr):
			problem = fmt.Sprintf("FSM target is node %d at term %d", p.NodeId, p.Term)
		case c.Op == "remove":
			found := false
			for _, hist := range p.Histories {
				if hist.Term == c.Term && addr(hist.NodeId) == c.Addr {
					found = true
				}
			}
			if !found || c.Term >= p.Term {
				problem = fmt.Sprintf("not a history of %v", p)
			}
		}
		if c.CoordTerm != h.leader.EstablishedTerm() {
			problem += fmt.Sprintf(" coord term %d", c.CoordTerm)
		}
		if problem != "" {
			mu.Lock()
			bad = append(bad, c.String()+": "+problem)
			mu.Unlock()
		}
		return nil
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bad...)
	}
}

// 3. Two-phase order: ASSIGNING at term+1 is committed before any RPC;
// Remove on the history node (old term) precedes Assign on the target;
// success leaves ASSIGNED without histories.
func TestMoveCommitsBeforeRPCsAndRemovesBeforeAssign(t *testing.T) {
	h, a, b := setupTwoNodes(t, nil)
	violations := checkTwoPhase(h)
	h.settle()
	onA := h.channelsOn(a)
	if len(onA) != 8 {
		t.Fatalf("%d channels on node %d, want 8", len(onA), a)
	}
	h.client.Reset()

	h.health.Set(a, false) // A's session looks dead; still UP in the FSM
	h.settle()
	if got := h.placement(); got[b] != 16 {
		t.Fatalf("placement %v, want all 16 on node %d", got, b)
	}
	calls := h.client.Calls()
	for _, name := range onA {
		want := []rpcCall{
			{Op: "remove", Addr: h.node(a).Address, PChannel: name, Term: 2, CoordTerm: testTerm},
			{Op: "assign", Addr: h.node(b).Address, PChannel: name, Term: 3, Mode: logpb.AccessMode_ACCESS_RW, CoordTerm: testTerm},
		}
		if got := callsFor(calls, name); !slices.Equal(got, want) {
			t.Fatalf("calls for %s: %v, want %v", name, got, want)
		}
		p := h.pchannel(name)
		if p.Term != 3 || p.NodeId != b || len(p.Histories) != 0 {
			t.Fatalf("%s: %v, want ASSIGNED on %d at 3 without histories", name, p, b)
		}
	}
	if len(calls) != 16 {
		t.Fatalf("%d calls, want 16 (channels already on B untouched): %v", len(calls), calls)
	}
	// Every call names the registration it is meant for, so a node refuses
	// it if another process now serves that address.
	for i, tg := range h.client.Targets() {
		n := h.node(a)
		if calls[i].Op == "assign" {
			n = h.node(b)
		}
		if tg != (NodeTarget{Addr: n.Address, ID: n.Id, Epoch: n.Epoch}) || tg.ID == 0 || tg.Epoch == 0 {
			t.Fatalf("%v sent to %+v, want node %d epoch %d at %s", calls[i], tg, n.Id, n.Epoch, n.Address)
		}
	}
	if v := violations(); len(v) != 0 {
		t.Fatalf("RPCs sent before the FSM recorded the assignment:\n%s", strings.Join(v, "\n"))
	}
}

// A channel whose WAL was reported broken (UNAVAILABLE) is reassigned with
// a new term even to the same node, after removing the broken term.
func TestUnavailableChannelIsReassignedWithNewTerm(t *testing.T) {
	h, _, _ := setupTwoNodes(t, nil)
	h.settle()
	name := pname(5)
	p := h.pchannel(name)
	h.leader.MustPropose(t, &logpb.MarkPChannelsUnavailable{Channels: []*logpb.PChannelTerm{{Pchannel: name, Term: p.Term, Reason: "wal broke"}}})
	if h.pchannel(name).State != logpb.PChannelState_PCHANNEL_UNAVAILABLE {
		t.Fatalf("not UNAVAILABLE")
	}
	h.client.Reset()
	h.settle()
	np := h.pchannel(name)
	if np.State != logpb.PChannelState_PCHANNEL_ASSIGNED || np.Term != p.Term+1 {
		t.Fatalf("%s: %v, want ASSIGNED at %d", name, np, p.Term+1)
	}
	want := []rpcCall{
		{Op: "remove", Addr: h.node(p.NodeId).Address, PChannel: name, Term: p.Term, CoordTerm: testTerm},
		{Op: "assign", Addr: h.node(np.NodeId).Address, PChannel: name, Term: p.Term + 1, Mode: logpb.AccessMode_ACCESS_RW, CoordTerm: testTerm},
	}
	if got := h.client.Calls(); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
}

// 4. A failed Assign leaves the channel ASSIGNING with the reason; the next
// round reissues it with term+1 after removing the failed placement.
func TestAssignFailureIsRecordedAndRetriedWithNextTerm(t *testing.T) {
	h, _, _ := setupTwoNodes(t, nil)
	victim := pname(3)
	h.client.setOnCall(func(c rpcCall) error {
		if c.Op == "assign" && c.PChannel == victim {
			return errors.New("disk on fire")
		}
		return nil
	})
	changed, err := h.round()
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !changed {
		t.Fatalf("round: changed=%v err=%v; want a changed round failing with the RPC error", changed, err)
	}
	p := h.pchannel(victim)
	if p.State != logpb.PChannelState_PCHANNEL_ASSIGNING || p.Term != 2 {
		t.Fatalf("victim %v, want ASSIGNING at 2", p)
	}
	if !strings.Contains(p.LastError, "disk on fire") || p.FailedAttempts != 1 || p.LastErrorMs != h.clock.Now().UnixMilli() {
		t.Fatalf("victim failure not recorded: %v", p)
	}
	for _, q := range h.leader.State().PChannels() {
		if q.Name != victim && q.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
			t.Fatalf("%s is %s; one channel's failure must not hold back the others", q.Name, q.State)
		}
	}

	failedOn := h.node(p.NodeId).Address
	h.client.Reset()
	h.client.setOnCall(nil)
	h.clock.Advance(time.Second)
	changed, err = h.round()
	if err != nil || !changed {
		t.Fatalf("retry round: changed=%v err=%v", changed, err)
	}
	np := h.pchannel(victim)
	if np.State != logpb.PChannelState_PCHANNEL_ASSIGNED || np.Term != 3 || np.FailedAttempts != 0 || np.LastError != "" || len(np.Histories) != 0 {
		t.Fatalf("victim after retry: %v, want ASSIGNED at 3 with the failure cleared", np)
	}
	want := []rpcCall{
		{Op: "remove", Addr: failedOn, PChannel: victim, Term: 2, CoordTerm: testTerm},
		{Op: "assign", Addr: h.node(np.NodeId).Address, PChannel: victim, Term: 3, Mode: logpb.AccessMode_ACCESS_RW, CoordTerm: testTerm},
	}
	if got := h.client.Calls(); !slices.Equal(got, want) {
		t.Fatalf("retry calls %v, want %v", got, want)
	}
	h.settle()
	if got := h.placement(); len(got) != 2 {
		t.Fatalf("placement %v", got)
	}
}

// The Run loop retries a failing channel after a backoff until it works,
// each attempt with a new term, and clears LastError on success.
func TestRunRetriesFailedAssignmentWithBackoff(t *testing.T) {
	h, _, _ := setupTwoNodes(t, nil)
	victim := pname(9)
	var mu sync.Mutex
	failures := 2
	h.client.setOnCall(func(c rpcCall) error {
		mu.Lock()
		defer mu.Unlock()
		if c.Op == "assign" && c.PChannel == victim && failures > 0 {
			failures--
			return errors.New("not yet")
		}
		return nil
	})
	stop := h.runBalancer()
	defer stop()
	h.eventually("every channel ASSIGNED", func() bool {
		for _, p := range h.leader.State().PChannels() {
			if p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
				return false
			}
		}
		return true
	})
	h.eventually("LastError cleared", func() bool { return h.b.LastError() == "" })
	var terms []int64
	for _, c := range callsFor(h.client.Calls(), victim) {
		if c.Op == "assign" {
			terms = append(terms, c.Term)
		}
	}
	if !slices.Equal(terms, []int64{2, 3, 4}) {
		t.Fatalf("victim assign terms %v, want [2 3 4]", terms)
	}
	if p := h.pchannel(victim); p.Term != 4 || p.FailedAttempts != 0 {
		t.Fatalf("victim %v, want ASSIGNED at 4 with no failed attempts", p)
	}
	stop()
	if n := len(appliedOf[*logpb.RecordAssignFailure](h.leader)); n == 0 || h.checkRoutineDecisions() <= n {
		t.Fatalf("%d assign failures recorded; the test needs failures, assignments and their completions", n)
	}
}

// The recorded reason stays valid UTF-8 (a proto3 string) and within
// MaxReasonBytes however the RPC error is cut.
func TestLongNonASCIIFailureReasonIsRecorded(t *testing.T) {
	h, _, _ := setupTwoNodes(t, nil)
	h.client.setOnCall(func(c rpcCall) error {
		lead := strings.Repeat("x", len(c.PChannel)%2+int(c.Term)%2)
		return errors.New(lead + strings.Repeat("é", vocab.MaxReasonBytes))
	})
	if _, err := h.round(); err == nil {
		t.Fatal("round succeeded")
	}
	for _, p := range h.leader.State().PChannels() {
		if p.FailedAttempts != 1 || p.LastError == "" {
			t.Fatalf("%s: failure not recorded: attempts %d, error %q", p.Name, p.FailedAttempts, p.LastError)
		}
		if !utf8.ValidString(p.LastError) || len(p.LastError) > vocab.MaxReasonBytes {
			t.Fatalf("%s: reason is not valid UTF-8 within %d bytes (%d bytes)", p.Name, vocab.MaxReasonBytes, len(p.LastError))
		}
	}
}

// 5. A Remove that fails on a DOWN history node is ignored.
func TestRemoveFailureOnDownNodeIsIgnored(t *testing.T) {
	h, a, b := setupTwoNodes(t, nil)
	h.settle()
	onA := h.channelsOn(a)
	addrA := h.node(a).Address
	h.leader.MustPropose(t, &logpb.MarkStreamingNodeDown{NodeId: a, Epoch: h.node(a).Epoch, Reason: "test: gone"})
	h.health.Set(a, false)
	h.client.Reset()
	h.client.setOnCall(func(c rpcCall) error {
		if c.Op == "remove" && c.Addr == addrA {
			return errors.New("connection refused")
		}
		return nil
	})
	h.settle()
	if got := h.placement(); got[b] != 16 {
		t.Fatalf("placement %v, want all on %d", got, b)
	}
	calls := h.client.Calls()
	for _, name := range onA {
		cs := callsFor(calls, name)
		if len(cs) != 2 || cs[0].Op != "remove" || cs[0].Addr != addrA || cs[0].Term != 2 || cs[1].Op != "assign" || cs[1].Term != 3 {
			t.Fatalf("calls for %s: %v, want remove on the down node then assign", name, cs)
		}
	}
}

// 5. A Remove that fails on a live history node (UP but unhealthy, or
// DRAINING) fails the channel: it stays ASSIGNING and Assign is not sent.
func TestRemoveFailureOnLiveNodeFailsTheChannel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		makeBad func(h *harness, a uint64)
	}{
		{"up-unhealthy", func(h *harness, a uint64) { h.health.Set(a, false) }},
		{"draining", func(h *harness, a uint64) {
			h.leader.MustPropose(h.t, &logpb.SetStreamingNodeDrain{NodeId: a, Draining: true, Reason: "test"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, a, b := setupTwoNodes(t, nil)
			h.settle()
			onA := h.channelsOn(a)
			addrA := h.node(a).Address
			tc.makeBad(h, a)
			h.client.Reset()
			h.client.setOnCall(func(c rpcCall) error {
				if c.Op == "remove" && c.Addr == addrA {
					return errors.New("deadline exceeded")
				}
				return nil
			})
			changed, err := h.round()
			if err == nil || !strings.Contains(err.Error(), "deadline exceeded") || !changed {
				t.Fatalf("round: changed=%v err=%v, want failure", changed, err)
			}
			for _, name := range onA {
				p := h.pchannel(name)
				if p.State != logpb.PChannelState_PCHANNEL_ASSIGNING || p.Term != 3 || p.FailedAttempts != 1 ||
					!strings.Contains(p.LastError, "remove from node") || len(p.Histories) != 1 || p.Histories[0].NodeId != a {
					t.Fatalf("%s: %v, want ASSIGNING at 3 with the remove failure and A's history", name, p)
				}
				for _, c := range callsFor(h.client.Calls(), name) {
					if c.Op == "assign" {
						t.Fatalf("%s: assign sent although remove failed: %v", name, c)
					}
				}
			}

			// Once the node answers, the retry removes both placements
			// (A at 2, the failed B at 3) before assigning at 4.
			h.client.Reset()
			h.client.setOnCall(nil)
			h.settle()
			if got := h.placement(); got[b] != 16 {
				t.Fatalf("placement %v", got)
			}
			for _, name := range onA {
				cs := callsFor(h.client.Calls(), name)
				if len(cs) != 3 || cs[2].Op != "assign" || cs[2].Term != 4 {
					t.Fatalf("%s retry calls %v", name, cs)
				}
				removed := map[rpcCall]bool{}
				for _, c := range cs[:2] {
					removed[c] = true
				}
				if !removed[rpcCall{Op: "remove", Addr: addrA, PChannel: name, Term: 2, CoordTerm: testTerm}] ||
					!removed[rpcCall{Op: "remove", Addr: h.node(b).Address, PChannel: name, Term: 3, CoordTerm: testTerm}] {
					t.Fatalf("%s retry removes %v", name, cs[:2])
				}
			}
		})
	}
}

// 6. Draining moves every channel off the node; no channel is ever sent to
// a DRAINING or DOWN node (checked at each Assign) — through the Run loop,
// driven by state and health changes.
func TestDrainAndDownMoveChannelsOffThroughRun(t *testing.T) {
	h := newHarness(t, nil)
	h.bootstrap()
	a := h.addNode("10.0.0.1:1001")
	b := h.addNode("10.0.0.2:1002")
	c := h.addNode("10.0.0.3:1003")

	var mu sync.Mutex
	var bad []string
	h.client.setOnCall(func(call rpcCall) error {
		if call.Op != "assign" {
			return nil
		}
		for _, n := range h.leader.State().StreamingNodes() {
			if n.Address == call.Addr && n.State != logpb.NodeState_NODE_UP {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%v to a %s node", call, n.State))
				mu.Unlock()
			}
		}
		return nil
	})
	allAssignedAvoiding := func(avoid ...uint64) func() bool {
		return func() bool {
			for _, p := range h.leader.State().PChannels() {
				if p.State != logpb.PChannelState_PCHANNEL_ASSIGNED || slices.Contains(avoid, p.NodeId) {
					return false
				}
			}
			return true
		}
	}
	stop := h.runBalancer()
	defer stop()
	h.eventually("initial assignment", allAssignedAvoiding())
	if got := h.placement(); got[a] == 0 || got[b] == 0 || got[c] == 0 {
		t.Fatalf("initial placement %v, want every node used", got)
	}

	h.leader.MustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: a, Draining: true, Reason: "maintenance"})
	h.eventually("drained node empty", allAssignedAvoiding(a))
	if st := h.node(a).State; st != logpb.NodeState_NODE_DRAINING {
		t.Fatalf("node %d is %s, want DRAINING", a, st)
	}

	h.leader.MustPropose(t, &logpb.MarkStreamingNodeDown{NodeId: b, Epoch: h.node(b).Epoch, Reason: "test"})
	h.health.Set(b, false)
	h.eventually("everything on the last node", allAssignedAvoiding(a, b))
	if got := h.placement(); got[c] != 16 {
		t.Fatalf("placement %v, want all on %d", got, c)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) != 0 {
		t.Fatalf("assigned to unavailable nodes:\n%s", strings.Join(bad, "\n"))
	}
}

// A change committed while a round runs (after it read the state) still
// triggers a later round, even when that round changed nothing.
func TestRunDoesNotMissChangesDuringARound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *harness, a uint64)
	}{
		{"state", func(h *harness, a uint64) {
			h.leader.MustPropose(h.t, &logpb.SetStreamingNodeDrain{NodeId: a, Draining: true})
		}},
		{"health", func(h *harness, a uint64) { h.health.Set(a, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, a, _ := setupTwoNodes(t, nil)
			h.settle()
			stop := h.runBalancer()
			defer stop()
			h.eventually("idle after a settled round", func() bool {
				h.b.mu.Lock()
				defer h.b.mu.Unlock()
				return h.b.rounds >= 1
			})
			// The next round reads the state, then the change lands.
			h.health.setOnHealthy(func() { tc.change(h, a) })
			h.b.Trigger()
			h.eventually("channels moved off the changed node", func() bool {
				for _, p := range h.leader.State().PChannels() {
					if p.NodeId == a || p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
						return false
					}
				}
				return true
			})
		})
	}
}

// 7. A leader that is not (or no longer) established makes no RPCs.
func TestNotEstablishedLeaderMakesNoRPCs(t *testing.T) {
	h, _, _ := setupTwoNodes(t, nil)
	h.leader.SetEstablished(0)
	changed, err := h.round()
	if err == nil || !strings.Contains(err.Error(), "no longer the leader") {
		t.Fatalf("round: changed=%v err=%v, want refusal", changed, err)
	}
	if c := h.client.Calls(); len(c) != 0 {
		t.Fatalf("RPCs made without leadership: %v", c)
	}
	p := h.pchannel(pname(0))
	if p.State != logpb.PChannelState_PCHANNEL_ASSIGNING || p.Term != 2 {
		t.Fatalf("%v", p)
	}
	if err := h.b.applyRPCs(context.Background(), p.Name, p.Term); err == nil {
		t.Fatal("applyRPCs without leadership succeeded")
	}
	if c := h.client.Calls(); len(c) != 0 {
		t.Fatalf("applyRPCs made calls without leadership: %v", c)
	}

	// Established again: the channels are reissued with a new term.
	h.leader.SetEstablished(testTerm)
	h.settle()
	for _, p := range h.leader.State().PChannels() {
		if p.Term != 3 {
			t.Fatalf("%s at term %d, want 3", p.Name, p.Term)
		}
	}
}

// 7. A leader deposed by a newer one: its commit is rejected by the FSM as
// stale, the round fails, nothing changes and nobody is called.
func TestDeposedLeaderCommitIsRejected(t *testing.T) {
	h, a, _ := setupTwoNodes(t, nil)
	h.settle()
	h.leader.SetRaftTerm(testTerm + 2)
	h.leader.MustPropose(t, &logpb.LeaderEstablished{Term: testTerm + 2, LeaderId: "coord-2"})
	// The raft term is now testTerm+2, but the round decides in its routine's
	// term (testTerm), and its proposals carry that term.
	before := snapshotPChannels(h)
	h.client.Reset()
	h.health.Set(a, false)
	changed, err := h.round()
	if err == nil || changed || !strings.Contains(err.Error(), "commit assignment") {
		t.Fatalf("round: changed=%v err=%v, want a rejected commit", changed, err)
	}
	samePChannels(t, before, snapshotPChannels(h))
	if c := h.client.Calls(); len(c) != 0 {
		t.Fatalf("calls after a rejected commit: %v", c)
	}
}

// 7. A decision made on a view in which a channel had another term is
// rejected as stale, whether the term moved before the round read the
// state for its commit or while the commit was in flight.
func TestStaleDecisionIsRejected(t *testing.T) {
	bump := func(h *harness, name string, to uint64) {
		p := h.pchannel(name)
		res := h.leader.MustPropose(h.t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
			{Pchannel: name, NodeId: to, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: p.Term}}})
		if len(res.GetAssign().GetAssigned()) != 1 {
			h.t.Fatalf("bump of %s changed nothing", name)
		}
	}

	t.Run("between layout and commit", func(t *testing.T) {
		h, a, b := setupTwoNodes(t, nil)
		h.settle()
		h.health.Set(a, false)
		plan, err := h.b.decide(h.leader.State(), "")
		if err != nil {
			t.Fatal(err)
		}
		bump(h, h.channelsOn(a)[0], b) // another decision commits meanwhile
		before := snapshotPChannels(h)
		h.client.Reset()
		changed, err := h.b.execute(context.Background(), h.b.leader, plan)
		if err == nil || changed || !strings.Contains(err.Error(), "expected") {
			t.Fatalf("round: changed=%v err=%v, want a stale rejection", changed, err)
		}
		samePChannels(t, before, snapshotPChannels(h))
		if c := h.client.Calls(); len(c) != 0 {
			t.Fatalf("calls after a stale decision: %v", c)
		}
		h.settle() // a fresh view works
		if got := h.placement(); got[b] != 16 {
			t.Fatalf("placement %v", got)
		}
	})

	t.Run("during commit", func(t *testing.T) {
		h, a, b := setupTwoNodes(t, nil)
		h.settle()
		h.health.Set(a, false)
		victim := h.channelsOn(a)[0]
		var before []*logpb.PChannelRecord
		h.leader.SetBeforeNextApply(func(body proto.Message) bool {
			if _, ok := body.(*logpb.AssignPChannels); !ok {
				return false
			}
			bump(h, victim, b)
			before = snapshotPChannels(h)
			return true
		})
		h.client.Reset()
		changed, err := h.round()
		if err == nil || changed || !strings.Contains(err.Error(), "expected") {
			t.Fatalf("round: changed=%v err=%v, want a stale rejection", changed, err)
		}
		if before == nil {
			t.Fatal("hook did not run")
		}
		samePChannels(t, before, snapshotPChannels(h))
		if c := h.client.Calls(); len(c) != 0 {
			t.Fatalf("calls after a stale decision: %v", c)
		}
	})
}

// 8. Without AllowRebalance, channels ASSIGNED on healthy nodes never move,
// even to a new empty node long after their assignment; channels on an
// unhealthy node are still recovered.
func TestNoRebalanceWhenDisallowed(t *testing.T) {
	setup := func(t *testing.T, allow bool) (*harness, uint64, uint64) {
		h := newHarness(t, func(c *Config) { c.Policy.AllowRebalance = allow })
		h.bootstrap()
		a := h.addNode("10.0.0.1:1001")
		h.settle()
		if got := h.placement(); got[a] != 16 {
			t.Fatalf("placement %v", got)
		}
		b := h.addNode("10.0.0.2:1002")
		h.clock.Advance(time.Hour) // far past MinRebalanceInterval
		h.client.Reset()
		return h, a, b
	}

	t.Run("disallowed", func(t *testing.T) {
		h, a, b := setup(t, false)
		before := snapshotPChannels(h)
		for i := 0; i < 3; i++ {
			if changed, err := h.round(); changed || err != nil {
				t.Fatalf("round %d: changed=%v err=%v", i, changed, err)
			}
		}
		samePChannels(t, before, snapshotPChannels(h))
		if c := h.client.Calls(); len(c) != 0 {
			t.Fatalf("calls %v", c)
		}
		// Lost WALs are still placed.
		h.health.Set(a, false)
		h.settle()
		if got := h.placement(); got[b] != 16 {
			t.Fatalf("placement %v, want all recovered on %d", got, b)
		}
	})

	t.Run("allowed", func(t *testing.T) {
		h, a, b := setup(t, true)
		h.settle()
		got := h.placement()
		if got[b] == 0 {
			t.Fatalf("placement %v: rebalance moved nothing to the new node", got)
		}
		if got[a]+got[b] != 16 {
			t.Fatalf("placement %v", got)
		}
	})

	t.Run("allowed, recently assigned and balanced", func(t *testing.T) {
		h := newHarness(t, nil)
		h.bootstrap()
		a := h.addNode("10.0.0.1:1001")
		b := h.addNode("10.0.0.2:1002")
		h.settle()
		h.clock.Advance(time.Minute) // within MinRebalanceInterval (5m)
		h.client.Reset()
		if changed, err := h.round(); changed || err != nil {
			t.Fatalf("round: changed=%v err=%v", changed, err)
		}
		if got := h.placement(); got[a] != 8 || got[b] != 8 {
			t.Fatalf("placement %v", got)
		}
	})
}

// The layout keeps only ASSIGNED channels on UP, healthy nodes; everything
// else must be placed. Nodes are the UP and healthy ones.
func TestLayout(t *testing.T) {
	h, a, b := setupTwoNodes(t, nil)
	c := h.addNode("10.0.0.3:1003")
	h.settle()
	h.leader.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: 100, Count: 2})
	coll, _ := h.leader.State().Collection(100)

	h.health.Set(b, false)
	h.leader.MustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: c, Draining: true})
	onA := h.channelsOn(a)
	unav := onA[0]
	h.leader.MustPropose(t, &logpb.MarkPChannelsUnavailable{Channels: []*logpb.PChannelTerm{{Pchannel: unav, Term: h.pchannel(unav).Term}}})

	plan, _ := h.b.decide(h.leader.State(), "")
	l, sig := plan.Layout, plan.Signature
	if !slices.Equal(l.Nodes, []uint64{a}) {
		t.Fatalf("nodes %v, want [%d]", l.Nodes, a)
	}
	if l.NowMs != h.clock.Now().UnixMilli() {
		t.Fatalf("now %d", l.NowMs)
	}
	vcount := 0
	for _, ch := range l.Channels {
		p := h.pchannel(ch.Name)
		wantNode := uint64(0)
		if p.NodeId == a && ch.Name != unav {
			wantNode = a
		}
		if ch.Node != wantNode {
			t.Fatalf("%s (on %d, %s): layout node %d, want %d", ch.Name, p.NodeId, p.State, ch.Node, wantNode)
		}
		if ch.LastAssignMs != p.LastAssignMs {
			t.Fatalf("%s last assign %d", ch.Name, ch.LastAssignMs)
		}
		vcount += len(ch.Collections)
		for _, id := range ch.Collections {
			if id != 100 {
				t.Fatalf("%s collections %v", ch.Name, ch.Collections)
			}
		}
	}
	if vcount != len(coll.Vchannels) {
		t.Fatalf("layout has %d vchannels, want %d", vcount, len(coll.Vchannels))
	}
	// The signature follows health.
	h.health.Set(b, true)
	if plan2, _ := h.b.decide(h.leader.State(), ""); plan2.Signature == sig {
		t.Fatal("signature ignores a health change")
	}
}

func TestNewValidatesConfig(t *testing.T) {
	leader := controllertest.NewLeader(t, controllertest.NewClock(), 1)
	for _, cfg := range []Config{
		{PChannels: -1},
		{PChannels: 70000},
		{PChannelPrefix: "bad prefix!"},
		{PolicyName: "nope"},
		{Policy: policy.Config{RebalanceMaxStep: -1}},
	} {
		cfg.StreamingClient = &fakeClient{}
		if _, err := New(leader, newFakeHealth(), cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	fc := &fakeClient{}
	b, err := New(leader, newFakeHealth(), Config{StreamingClient: fc})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if !fc.closed {
		t.Fatal("Close did not close the streaming client")
	}
}

// Trigger forces a round even when nothing changed.
func TestTriggerForcesRound(t *testing.T) {
	h, _, _ := setupTwoNodes(t, nil)
	stop := h.runBalancer()
	defer stop()
	rounds := func() uint64 {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return h.b.rounds
	}
	// Settled: a round changed nothing, so Run now waits for the interval
	// (an hour of a clock that barely moves), a change or a trigger.
	h.eventually("settled", func() bool {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return h.b.quiet > 0 && h.b.lastError == ""
	})
	n := rounds()
	h.b.Trigger()
	h.eventually("forced round", func() bool { return rounds() > n })
}
