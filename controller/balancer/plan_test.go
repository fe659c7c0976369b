package balancer

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer/policy"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Tests of the pure decision: states are built by committing commands to
// the fake leader's real FSM; Decide reads them with a health function
// and a fixed time, and nothing runs.

var planNow = controllertest.Epoch.Add(time.Hour)

// countingPolicy counts Balance calls of the default policy.
type countingPolicy struct {
	policy.Policy
	calls int
}

func (c *countingPolicy) Balance(l policy.Layout) (map[string]uint64, error) {
	c.calls++
	return c.Policy.Balance(l)
}

func defaultPolicy(t testing.TB) policy.Policy {
	t.Helper()
	p, err := policy.New("", policy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// planState commits streaming with n channels and registers nodes; it
// returns the leader and the node IDs.
func planState(t testing.TB, channels, nodes int) (*controllertest.Leader, []uint64) {
	t.Helper()
	l := controllertest.NewLeader(t, controllertest.NewClock(), testTerm)
	var names []string
	for i := 0; i < channels; i++ {
		names = append(names, vocab.PChannelName(testPrefix, i))
	}
	for first := true; first || len(names) > 0; first = false {
		chunk := names[:min(len(names), vocab.MaxPChannelsPerCmd)]
		names = names[len(chunk):]
		var body proto.Message = &logpb.AddPChannels{Pchannels: chunk}
		if first {
			body = &logpb.InitStreaming{ClusterId: testClusterID, Pchannels: chunk}
		}
		if len(chunk) > 0 {
			l.MustPropose(t, body)
		}
	}
	var ids []uint64
	for i := 0; i < nodes; i++ {
		res := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: fmt.Sprintf("10.0.0.%d:1", i+1), Incarnation: fmt.Sprint("inc-", i)})
		ids = append(ids, res.GetRegisterNode().GetNodeId())
	}
	return l, ids
}

// assign commits channel name to node and completes it (ASSIGNED).
func assign(t testing.TB, l *controllertest.Leader, name string, node uint64, done bool) {
	t.Helper()
	p, _ := l.State().PChannel(name)
	res := l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: name, NodeId: node, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: p.Term}}})
	if done {
		l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: res.GetAssign().GetAssigned()})
	}
}

func healthyOnly(ids ...uint64) func(uint64) bool {
	return func(n uint64) bool { return slices.Contains(ids, n) }
}

func TestDecideTable(t *testing.T) {
	ch := func(i int) string { return vocab.PChannelName(testPrefix, i) }
	for _, tc := range []struct {
		name string
		// build returns the view to decide on.
		build func(t *testing.T) View
		// check inspects the plan and error.
		check func(t *testing.T, v View, plan Plan, err error)
	}{{
		name: "no channels: nothing to do, even without nodes",
		build: func(t *testing.T) View {
			l := controllertest.NewLeader(t, controllertest.NewClock(), testTerm)
			return View{State: l.State(), Healthy: healthyOnly()}
		},
		check: func(t *testing.T, _ View, plan Plan, err error) {
			if err != nil || len(plan.Assignments) != 0 || plan.Signature == "" {
				t.Fatalf("plan %+v err %v; want an empty plan with a signature", plan, err)
			}
		},
	}, {
		name: "channels but no healthy node: ErrNoNodes with the layout",
		build: func(t *testing.T) View {
			l, _ := planState(t, 3, 2)
			return View{State: l.State(), Healthy: healthyOnly()}
		},
		check: func(t *testing.T, _ View, plan Plan, err error) {
			if !errors.Is(err, policy.ErrNoNodes) || len(plan.Layout.Channels) != 3 || plan.Signature == "" {
				t.Fatalf("plan %+v err %v; want ErrNoNodes with 3 channels laid out", plan, err)
			}
		},
	}, {
		name: "fresh channels go to the one healthy node, sorted, expecting their term",
		build: func(t *testing.T) View {
			l, ids := planState(t, 4, 2)
			return View{State: l.State(), Healthy: healthyOnly(ids[1])}
		},
		check: func(t *testing.T, v View, plan Plan, err error) {
			if err != nil || len(plan.Assignments) != 4 {
				t.Fatalf("plan %+v err %v; want 4 assignments", plan, err)
			}
			for i, a := range plan.Assignments {
				p, _ := v.State.PChannel(ch(i))
				if a.Pchannel != ch(i) || !v.Healthy(a.NodeId) || a.ExpectedTerm != p.Term || a.Mode != logpb.AccessMode_ACCESS_RW {
					t.Errorf("assignment %d = %v; want %s on the healthy node at term %d", i, a, ch(i), p.Term)
				}
			}
			if plan.Layout.NowMs != planNow.UnixMilli() {
				t.Errorf("layout time %d; want the decision time %d", plan.Layout.NowMs, planNow.UnixMilli())
			}
		},
	}, {
		name: "a channel on an unhealthy node moves, with its current term expected",
		build: func(t *testing.T) View {
			l, ids := planState(t, 2, 2)
			assign(t, l, ch(0), ids[0], true)
			assign(t, l, ch(1), ids[1], true)
			return View{State: l.State(), Healthy: healthyOnly(ids[1])}
		},
		check: func(t *testing.T, v View, plan Plan, err error) {
			p0, _ := v.State.PChannel(ch(0))
			if err != nil || len(plan.Assignments) != 1 || plan.Assignments[0].Pchannel != ch(0) ||
				!v.Healthy(plan.Assignments[0].NodeId) || plan.Assignments[0].ExpectedTerm != p0.Term || p0.Term == 0 {
				t.Fatalf("plan %v err %v; want only %s moved to the healthy node expecting term %d", plan.Assignments, err, ch(0), p0.Term)
			}
			if plan.Layout.Channels[0].Node != 0 || plan.Layout.Channels[1].Node == 0 {
				t.Errorf("layout %+v; want %s to be placed and %s to stay", plan.Layout.Channels, ch(0), ch(1))
			}
		},
	}, {
		name: "an ASSIGNING channel is decided again",
		build: func(t *testing.T) View {
			l, ids := planState(t, 1, 1)
			assign(t, l, ch(0), ids[0], false)
			return View{State: l.State(), Healthy: healthyOnly(ids...)}
		},
		check: func(t *testing.T, _ View, plan Plan, err error) {
			if err != nil || len(plan.Assignments) != 1 {
				t.Fatalf("plan %v err %v; want the ASSIGNING channel re-assigned", plan.Assignments, err)
			}
		},
	}, {
		name: "a balanced signature is not decided again",
		build: func(t *testing.T) View {
			l, ids := planState(t, 4, 1)
			v := View{State: l.State(), Healthy: healthyOnly(ids...)}
			first, err := Decide(v, planNow, defaultPolicy(t))
			if err != nil || len(first.Assignments) == 0 {
				t.Fatalf("first decision %v %v", first.Assignments, err)
			}
			v.Balanced = first.Signature
			return v
		},
		check: func(t *testing.T, _ View, plan Plan, err error) {
			if err != nil || len(plan.Assignments) != 0 {
				t.Fatalf("plan %v err %v; want nothing for a balanced view", plan.Assignments, err)
			}
		},
	}, {
		name: "one plan carries at most one command's worth",
		build: func(t *testing.T) View {
			l, ids := planState(t, vocab.MaxPChannelsPerCmd+3, 1)
			return View{State: l.State(), Healthy: healthyOnly(ids...)}
		},
		check: func(t *testing.T, _ View, plan Plan, err error) {
			if err != nil || len(plan.Assignments) != vocab.MaxPChannelsPerCmd {
				t.Fatalf("%d assignments, err %v; want %d", len(plan.Assignments), err, vocab.MaxPChannelsPerCmd)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.build(t)
			plan, err := Decide(v, planNow, defaultPolicy(t))
			tc.check(t, v, plan, err)
		})
	}
}

// TestDecideSkipsThePolicyForABalancedView: the policy runs once for a
// view and not again while its signature is the balanced one.
func TestDecideSkipsThePolicyForABalancedView(t *testing.T) {
	l, ids := planState(t, 3, 2)
	p := &countingPolicy{Policy: defaultPolicy(t)}
	v := View{State: l.State(), Healthy: healthyOnly(ids...)}
	plan, err := Decide(v, planNow, p)
	if err != nil || p.calls != 1 {
		t.Fatalf("err %v, %d policy calls; want 1", err, p.calls)
	}
	v.Balanced = plan.Signature
	if _, err := Decide(v, planNow, p); err != nil || p.calls != 1 {
		t.Fatalf("err %v, %d policy calls; want still 1", err, p.calls)
	}
	v.Healthy = healthyOnly(ids[0]) // health changes the signature
	if _, err := Decide(v, planNow, p); err != nil || p.calls != 2 {
		t.Fatalf("err %v, %d policy calls after a health change; want 2", err, p.calls)
	}
}

// TestDecideProperties: on random states (nodes up, drained or down,
// healthy or not; channels fresh, ASSIGNING or ASSIGNED anywhere) the
// decision is deterministic, places every channel that must move onto an
// UP healthy node, never re-assigns a channel in place, expects each
// channel's current term, and applying plans settles within a few rounds.
func TestDecideProperties(t *testing.T) {
	p := defaultPolicy(t)
	rapid.Check(t, func(rt *rapid.T) {
		nChan := rapid.IntRange(0, 24).Draw(rt, "channels")
		nNode := rapid.IntRange(0, 5).Draw(rt, "nodes")
		l, ids := planState(t, nChan, nNode)
		for i := 0; i < nChan && nNode > 0; i++ {
			switch rapid.IntRange(0, 2).Draw(rt, fmt.Sprint("chan-", i)) {
			case 1, 2:
				node := ids[rapid.IntRange(0, nNode-1).Draw(rt, fmt.Sprint("node-", i))]
				assign(t, l, vocab.PChannelName(testPrefix, i), node, rapid.Bool().Draw(rt, fmt.Sprint("done-", i)))
			}
		}
		healthy := map[uint64]bool{}
		for _, id := range ids {
			healthy[id] = rapid.Bool().Draw(rt, fmt.Sprint("healthy-", id))
			if rapid.IntRange(0, 4).Draw(rt, fmt.Sprint("drain-", id)) == 0 {
				l.MustPropose(t, &logpb.SetStreamingNodeDrain{NodeId: id, Draining: true})
			}
		}
		v := View{State: l.State(), Healthy: func(n uint64) bool { return healthy[n] }}
		plan, err := Decide(v, planNow, p)
		again, err2 := Decide(v, planNow, p)
		if fmt.Sprint(err) != fmt.Sprint(err2) || plan.Signature != again.Signature || !equalAssignments(plan.Assignments, again.Assignments) {
			rt.Fatalf("Decide is not deterministic: %v/%v, %v/%v", err, err2, plan.Assignments, again.Assignments)
		}
		checkPlan(rt, v.State, healthy, plan, err)
		// Apply plans as the loop would; the layout settles.
		for round := 0; err == nil && len(plan.Assignments) > 0; round++ {
			if round == 30 {
				rt.Fatalf("plans did not settle in 30 rounds; last %v", plan.Assignments)
			}
			res := l.MustPropose(t, &logpb.AssignPChannels{Assignments: plan.Assignments})
			l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: res.GetAssign().GetAssigned()})
			v.State = l.State()
			plan, err = Decide(v, planNow, p)
			checkPlan(rt, v.State, healthy, plan, err)
		}
	})
}

func checkPlan(rt *rapid.T, st *fsm.State, healthy map[uint64]bool, plan Plan, err error) {
	up := map[uint64]bool{}
	for _, n := range st.StreamingNodes() {
		up[n.Id] = n.State == logpb.NodeState_NODE_UP && healthy[n.Id]
	}
	nodes := 0
	for _, ok := range up {
		if ok {
			nodes++
		}
	}
	if len(plan.Layout.Nodes) != nodes {
		rt.Fatalf("layout nodes %v; want the %d UP healthy ones", plan.Layout.Nodes, nodes)
	}
	switch {
	case len(st.PChannels()) == 0:
		if err != nil || len(plan.Assignments) != 0 {
			rt.Fatalf("no channels: plan %v err %v", plan.Assignments, err)
		}
		return
	case nodes == 0:
		if !errors.Is(err, policy.ErrNoNodes) {
			rt.Fatalf("no node may hold channels: err %v; want ErrNoNodes", err)
		}
		return
	case err != nil:
		rt.Fatalf("Decide: %v", err)
	}
	placed := map[string]bool{}
	for i, a := range plan.Assignments {
		if i > 0 && plan.Assignments[i-1].Pchannel >= a.Pchannel {
			rt.Fatalf("assignments not sorted and unique: %v", plan.Assignments)
		}
		pc, ok := st.PChannel(a.Pchannel)
		if !ok || !up[a.NodeId] || a.ExpectedTerm != pc.Term {
			rt.Fatalf("assignment %v: channel known %v, target UP and healthy %v, channel term %d", a, ok, up[a.NodeId], pc.GetTerm())
		}
		if pc.State == logpb.PChannelState_PCHANNEL_ASSIGNED && pc.NodeId == a.NodeId {
			rt.Fatalf("assignment %v re-assigns a channel in place", a)
		}
		placed[a.Pchannel] = true
	}
	for _, ch := range plan.Layout.Channels {
		pc, _ := st.PChannel(ch.Name)
		stays := pc.State == logpb.PChannelState_PCHANNEL_ASSIGNED && up[pc.NodeId]
		if (ch.Node != 0) != stays || (stays && ch.Node != pc.NodeId) {
			rt.Fatalf("layout channel %+v for %s on %d", ch, pc.State, pc.NodeId)
		}
		if !stays && !placed[ch.Name] {
			rt.Fatalf("%s (%s on %d) must be placed but the plan leaves it: %v", ch.Name, pc.State, pc.NodeId, plan.Assignments)
		}
	}
}

func equalAssignments(a, b []*logpb.PChannelAssignment) bool {
	return slices.EqualFunc(a, b, func(x, y *logpb.PChannelAssignment) bool { return proto.Equal(x, y) })
}
