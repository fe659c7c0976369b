package balancer

import (
	"fmt"
	"sort"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer/policy"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// View is what one balance decision reads: an applied state and, at
// decision time, which streaming nodes are healthy.
type View struct {
	State   *fsm.State
	Healthy func(node uint64) bool
	// Balanced, when set, is the signature of the last view a round
	// balanced without a change: a view with the same signature is not
	// decided again (the policy does not run; no assignments).
	Balanced string
}

// Plan is one balance round's decision, made by Decide.
type Plan struct {
	// Layout is the policy's input: the UP and healthy nodes, and every
	// PChannel with the node it may stay on (0: it must be placed).
	Layout policy.Layout
	// Signature sums up everything that should start another round when it
	// changes (healthy nodes; each channel's state, node, term and VChannel
	// count). Run skips an unforced round whose signature it has balanced.
	Signature string
	// Assignments are what to commit, sorted by channel name, at most
	// vocab.MaxPChannelsPerCmd (the rest follow in the next round).
	// Each expects the channel's term in View.State, so the FSM rejects
	// the commit if that channel moved on meanwhile. Empty: nothing moves.
	Assignments []*logpb.PChannelAssignment
}

// Decide is the balance decision, pure in (view, now) for a given policy:
// it reads no clock, does no I/O and proposes nothing. The returned plan
// always carries Layout and Signature, also with an error: ErrNoNodes
// when channels exist but no node may hold them, or the policy's failure.
func Decide(v View, now time.Time, p policy.Policy) (Plan, error) {
	plan := Plan{Layout: policy.Layout{NowMs: now.UnixMilli()}}
	l := &plan.Layout
	healthy := map[uint64]bool{}
	for _, n := range v.State.StreamingNodes() {
		if n.State == logpb.NodeState_NODE_UP && v.Healthy(n.Id) {
			healthy[n.Id] = true
			l.Nodes = append(l.Nodes, n.Id)
		}
	}
	colls := map[string][]int64{}
	for _, c := range v.State.Collections() {
		for _, vc := range c.Vchannels {
			pc := vocab.PChannelOf(vc)
			colls[pc] = append(colls[pc], c.CollectionId)
		}
	}
	plan.Signature = fmt.Sprint(l.Nodes)
	for _, pc := range v.State.PChannels() {
		ch := policy.Channel{Name: pc.Name, Collections: colls[pc.Name], LastAssignMs: pc.LastAssignMs}
		if pc.State == logpb.PChannelState_PCHANNEL_ASSIGNED && healthy[pc.NodeId] {
			ch.Node = pc.NodeId
		}
		l.Channels = append(l.Channels, ch)
		plan.Signature += fmt.Sprintf("|%s:%d:%d:%d:%d", pc.Name, pc.State, pc.NodeId, pc.Term, len(ch.Collections))
	}
	if len(l.Channels) == 0 || (v.Balanced != "" && plan.Signature == v.Balanced) {
		return plan, nil
	}
	if len(l.Nodes) == 0 {
		return plan, policy.ErrNoNodes
	}
	expected, err := p.Balance(*l)
	if err != nil {
		return plan, fmt.Errorf("policy %s: %w", p.Name(), err)
	}
	plan.Assignments = moves(v.State, expected)
	return plan, nil
}

// moves lists the assignments that take st to expected: every channel not
// already ASSIGNED to its expected node, by name, at most one command's
// worth.
func moves(st *fsm.State, expected map[string]uint64) []*logpb.PChannelAssignment {
	names := make([]string, 0, len(expected))
	for name := range expected {
		names = append(names, name)
	}
	sort.Strings(names)
	var as []*logpb.PChannelAssignment
	for _, name := range names {
		pc, ok := st.PChannel(name)
		if !ok {
			continue
		}
		node := expected[name]
		if pc.State == logpb.PChannelState_PCHANNEL_ASSIGNED && pc.NodeId == node {
			continue
		}
		as = append(as, &logpb.PChannelAssignment{Pchannel: name, NodeId: node, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: pc.Term})
		if len(as) == vocab.MaxPChannelsPerCmd {
			break
		}
	}
	return as
}
