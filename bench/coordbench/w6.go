package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
)

// w6: streaming node churn with 1,000 assignment watchers. Each client
// owns one simulated streaming node (simnode.go) and alternates: if its
// node is out, one op is a join, otherwise a leave. Two more simulated
// base nodes stay joined all the time (a leaving node always has
// survivors), and on coordd the launcher's two real streaming nodes are
// drained for the workload, so on both systems every PChannel is held by
// simulated nodes only.
//
// One op ends when every one of the 1,000 watchers holds a view in which
// the change has taken effect:
//   - join of X: X is a live node and X holds at least one ASSIGNED
//     PChannel, or no live node holds more than one (X is not due any);
//   - leave of X: X is not a live node, no PChannel names X, and every
//     PChannel X held is ASSIGNED to a live node.
//
// The condition is read from each watcher's own view, so the op includes
// the balancer's round(s), the streaming node calls and the fan-out to
// every watcher. The watchers are client.Watcher (coordd's client), spread
// over coordd's three members, and over three connections to the peer.

const (
	w6Watchers  = 1000
	w6BaseNodes = 2
)

func w6() workloadDef {
	return workloadDef{setup: setupChurn, teardown: teardownChurn, callTimeout: 30 * time.Second,
		variants: []variant{{name: "join-leave-1000-watchers", newOp: w6Op}}}
}

// churnSet is one system's w6 state.
type churnSet struct {
	srv      *simServer
	reg      coordpb.StreamingNodeRegistryClient
	clients  []*client.Client
	self     *client.Watcher
	watchers []*client.Watcher
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	drained  []uint64 // coordd's real streaming nodes, drained for w6

	mu    sync.Mutex
	nodes []*simNode // base nodes, then one per client
}

func (cs *churnSet) node(i int) (*simNode, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for len(cs.nodes) <= i {
		addr, err := cs.srv.listen()
		if err != nil {
			return nil, err
		}
		cs.nodes = append(cs.nodes, &simNode{addr: addr, reg: cs.reg, self: cs.self})
	}
	return cs.nodes[i], nil
}

func setupChurn(s *system) error {
	cs := &churnSet{srv: newSimServer(), reg: coordpb.NewStreamingNodeRegistryClient(s.conns[0])}
	s.churn = cs
	ctx, cancel := context.WithCancel(context.Background())
	cs.cancel = cancel
	run := func(w *client.Watcher) {
		cs.wg.Add(1)
		go func() { defer cs.wg.Done(); _ = w.Run(ctx) }()
	}
	for _, addr := range s.watchAddrs {
		c, err := client.New(context.Background(), client.Config{Endpoints: []string{addr}})
		if err != nil {
			return err
		}
		cs.clients = append(cs.clients, c)
	}
	lc, err := client.New(context.Background(), client.Config{Endpoints: []string{s.leaderAddr}})
	if err != nil {
		return err
	}
	cs.clients = append(cs.clients, lc)
	cs.self = lc.NewWatcher()
	run(cs.self)
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	base := map[uint64]bool{}
	for i := range w6BaseNodes {
		n, err := cs.node(i)
		if err != nil {
			return err
		}
		id, err := n.join(sctx)
		if err != nil {
			return err
		}
		base[id] = true
	}
	if s.name == "coordd" { // its real streaming nodes make room for the simulated ones
		ch := coordpb.NewChannelsClient(s.conns[0])
		nodes, err := ch.ListNodes(sctx, &coordpb.ListNodesRequest{Consistency: coordpb.ReadConsistency_LINEARIZABLE})
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		for _, n := range nodes.Nodes {
			if !base[n.Id] && n.State == "UP" {
				if _, err := ch.DrainNode(sctx, &coordpb.DrainNodeRequest{NodeId: n.Id, Reason: "w6"}); err != nil {
					return fmt.Errorf("drain node %d: %w", n.Id, err)
				}
				cs.drained = append(cs.drained, n.Id)
			}
		}
	}
	for i := range w6Watchers {
		w := cs.clients[i%len(s.watchAddrs)].NewWatcher()
		cs.watchers = append(cs.watchers, w)
		run(w)
	}
	onBase := func(v *client.AssignmentView) bool {
		for _, c := range v.Channels {
			if c.State != "ASSIGNED" || !base[c.NodeId] {
				return false
			}
		}
		return len(v.Channels) > 0
	}
	if err := cs.waitAll(sctx, onBase); err != nil {
		return fmt.Errorf("channels not on the base nodes in every watcher: %w", err)
	}
	return nil
}

func teardownChurn(s *system) error {
	cs := s.churn
	if cs == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var first error
	for _, id := range cs.drained {
		if _, err := coordpb.NewChannelsClient(s.conns[0]).UndrainNode(ctx, &coordpb.DrainNodeRequest{NodeId: id}); err != nil && first == nil {
			first = fmt.Errorf("undrain %d: %w", id, err)
		}
	}
	for _, n := range cs.nodes {
		if n.joined() {
			if _, _, err := n.leave(ctx); err != nil && first == nil {
				first = err
			}
		}
	}
	cs.cancel()
	cs.wg.Wait()
	for _, c := range cs.clients {
		c.Close()
	}
	cs.srv.srv.Stop()
	s.churn = nil
	return first
}

func w6Op(s *system, c, _ int) clientOp {
	return func(ctx context.Context, _ int) error {
		cs := s.churn
		n, err := cs.node(w6BaseNodes + c)
		if err != nil {
			return err
		}
		if !n.joined() {
			id, err := n.join(ctx)
			if err != nil {
				return err
			}
			return cs.waitAll(ctx, func(v *client.AssignmentView) bool { return joinedIn(v, id) })
		}
		id, held, err := n.leave(ctx)
		if err != nil {
			return err
		}
		return cs.waitAll(ctx, func(v *client.AssignmentView) bool { return leftIn(v, id, held) })
	}
}

// joinedIn: id is live and holds an ASSIGNED channel, or no live node
// holds more than one.
func joinedIn(v *client.AssignmentView, id uint64) bool {
	if v.Nodes[id] == nil {
		return false
	}
	per := map[uint64]int{}
	for _, c := range v.Channels {
		if c.State == "ASSIGNED" && v.Nodes[c.NodeId] != nil {
			per[c.NodeId]++
		}
	}
	if per[id] > 0 {
		return true
	}
	for _, k := range per {
		if k > 1 {
			return false
		}
	}
	return true
}

// leftIn: id is not live, no channel names it, and every channel it held
// is ASSIGNED to a live node.
func leftIn(v *client.AssignmentView, id uint64, held []string) bool {
	if v.Nodes[id] != nil {
		return false
	}
	for _, c := range v.Channels {
		if c.NodeId == id {
			return false
		}
	}
	for _, p := range held {
		if _, _, ok := v.Owner(p); !ok {
			return false
		}
	}
	return true
}

// waitAll waits until every watcher's view satisfies ok.
func (cs *churnSet) waitAll(ctx context.Context, ok func(*client.AssignmentView) bool) error {
	for i, w := range cs.watchers {
		for {
			v := w.View()
			if v != nil && ok(v) {
				break
			}
			var have client.Version
			if v != nil {
				have = v.Version
			}
			if _, err := w.WaitNewer(ctx, have); err != nil {
				return fmt.Errorf("watcher %d at %v: %w", i, have, err)
			}
		}
	}
	return nil
}
