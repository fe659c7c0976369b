package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/balancer/policy"
)

// The assigner is Milvus's streamingcoord balancer and channel manager:
// the PChannel assignment lives in etcd (one key per PChannel under
// pchannelPrefix) with an in-memory copy; a balance round reads the live
// sessions and the copy, asks the balance policy for the expected layout
// (coordd's vchannelFair, the same pure function of the layout coordd
// uses, itself Milvus's policy), and for the channels that move:
//
//  1. one transaction (per 64 channels) that compares the coordinator's
//     session revision and each PChannel key's revision and puts the new
//     assignment, term + 1, ASSIGNING;
//  2. Remove on the previous owner and Assign on the new one
//     (StreamingNodeService, concurrently for all moved channels);
//  3. one transaction marking the channels that were assigned ASSIGNED
//     (the same compares).
//
// Every change to memory (after its etcd write succeeded) bumps the view's
// version and wakes every WatchAssignments stream, which sends the whole
// current view from memory: Milvus's streamingcoord notifies its watchers
// from memory after the etcd write and sends full assignments.
//
// A watcher that falls behind gets only the newest view (the versions in
// between are skipped).
//
// What it leaves out, each of which can only make it faster: it does not
// recover an interrupted round at start (it only reads the keys); one view
// message per version is shared by every stream (gRPC still encodes it per
// stream); a node gets channels without first reporting that it has seen
// its registration on the assignment stream (coordd waits for that); it
// keeps no DOWN node records beyond the addresses Remove needs.

const pchannelPrefix = "streamingcoord-meta/pchannel/"

type pchState struct {
	term         int64
	state        string // ASSIGNING or ASSIGNED
	node         uint64
	rev          int64 // the key's mod revision
	lastAssignMs int64
}

type assigner struct {
	kv      *store
	cat     *catalog
	pol     policy.Policy
	trigger chan struct{}
	conns   *snConns

	mu       sync.Mutex
	nodes    map[uint64]*coordpb.StreamingNode // live sessions
	gone     map[uint64]*coordpb.StreamingNode // ended sessions (addresses for Remove)
	names    []string                          // PChannels, sorted
	chans    map[string]*pchState
	local    uint64
	view     *coordpb.AssignmentUpdate // the full view at local; never modified
	changed  chan struct{}             // closed when local moves
	cchannel string
}

// newAssigner loads the PChannel records the catalog saved.
func newAssigner(ctx context.Context, kv *store, cat *catalog, pol policy.Policy) (*assigner, error) {
	a := &assigner{kv: kv, cat: cat, pol: pol, trigger: make(chan struct{}, 1), conns: &snConns{m: map[string]*grpc.ClientConn{}},
		nodes: map[uint64]*coordpb.StreamingNode{}, gone: map[uint64]*coordpb.StreamingNode{}, chans: map[string]*pchState{},
		changed: make(chan struct{}), cchannel: cat.pchannels[0] + "_vcchan"}
	resp, err := kv.cli.Get(ctx, pchannelPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("load pchannels: %w", err)
	}
	for _, kvp := range resp.Kvs {
		p := &coordpb.PChannel{}
		if err := proto.Unmarshal(kvp.Value, p); err != nil {
			return nil, fmt.Errorf("pchannel %s: %w", kvp.Key, err)
		}
		a.names = append(a.names, p.Name)
		a.chans[p.Name] = &pchState{term: p.Term, state: p.State, node: p.NodeId, rev: kvp.ModRevision}
	}
	slices.Sort(a.names)
	a.mu.Lock()
	a.publishLocked()
	a.mu.Unlock()
	return a, nil
}

func (a *assigner) currentVersion() *coordpb.Version {
	a.mu.Lock()
	defer a.mu.Unlock()
	return proto.Clone(a.view.Version).(*coordpb.Version)
}

// publishLocked bumps the version, rebuilds the view and wakes watchers.
func (a *assigner) publishLocked() {
	a.local++
	v := &coordpb.AssignmentUpdate{Version: &coordpb.Version{Global: 1, Local: a.local}, Full: true, Cchannel: a.cchannel}
	ids := make([]uint64, 0, len(a.nodes))
	for id := range a.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		v.Nodes = append(v.Nodes, a.nodes[id])
	}
	for _, n := range a.names {
		c := a.chans[n]
		v.Channels = append(v.Channels, &coordpb.ChannelAssignment{Pchannel: n, Term: c.term, State: c.state, NodeId: c.node, AccessMode: "RW"})
	}
	a.view = v
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *assigner) kick() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

func (a *assigner) nodeUp(n *coordpb.StreamingNode) {
	a.mu.Lock()
	a.nodes[n.Id] = n
	a.publishLocked()
	a.mu.Unlock()
	a.kick()
}

func (a *assigner) nodeDown(id uint64) {
	a.mu.Lock()
	if n, ok := a.nodes[id]; ok {
		delete(a.nodes, id)
		down := proto.Clone(n).(*coordpb.StreamingNode)
		down.State = "DOWN"
		a.gone[id] = down
		a.publishLocked()
	}
	a.mu.Unlock()
	a.kick()
}

// run balances on every trigger (and once a minute) until stop closes; a
// round that changed something is followed by another at once, a failed
// one after a backoff (10 ms doubling to 1 s).
func (a *assigner) run(stop <-chan struct{}) {
	backoff := time.Duration(0)
	for {
		changed, err := a.round(context.Background())
		switch {
		case err != nil:
			backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
			log.Printf("etcdcoord: balance round: %v (retry in %v)", err, backoff)
			select {
			case <-stop:
				return
			case <-time.After(backoff):
			}
			continue
		case changed:
			backoff = 0
			continue
		}
		backoff = 0
		select {
		case <-stop:
			return
		case <-a.trigger:
		case <-time.After(time.Minute):
		}
	}
}

// move is one channel a round reassigns.
type move struct {
	name       string
	from, to   *coordpb.StreamingNode // from: nil when never held
	fromTerm   int64
	term, rev  int64
	assignedOK bool
}

// round is one balance round; changed reports whether any channel moved.
func (a *assigner) round(ctx context.Context) (changed bool, err error) {
	l, snap := a.layout()
	if len(l.Nodes) == 0 {
		return false, nil
	}
	expected, err := a.pol.Balance(l)
	if err != nil {
		return false, fmt.Errorf("policy: %w", err)
	}
	var moves []*move
	for _, n := range a.names {
		c := snap[n]
		if c.state == "ASSIGNED" && c.node == expected[n] {
			continue
		}
		m := &move{name: n, fromTerm: c.term, term: c.term + 1, rev: c.rev}
		a.mu.Lock()
		m.to = a.nodes[expected[n]]
		if f := a.nodes[c.node]; f != nil {
			m.from = f
		} else {
			m.from = a.gone[c.node]
		}
		a.mu.Unlock()
		if m.to == nil {
			return false, fmt.Errorf("node %d left during the round", expected[n])
		}
		moves = append(moves, m)
	}
	if len(moves) == 0 {
		return false, nil
	}
	// 1. the decision
	if err := a.persist(ctx, moves, "ASSIGNING"); err != nil {
		return false, fmt.Errorf("save assignment: %w", err)
	}
	// 2. the streaming nodes
	var wg sync.WaitGroup
	for _, m := range moves {
		wg.Add(1)
		go func() { defer wg.Done(); m.assignedOK = a.callNodes(ctx, m) == nil }()
	}
	wg.Wait()
	var done []*move
	for _, m := range moves {
		if m.assignedOK {
			done = append(done, m)
		}
	}
	// 3. done
	if len(done) > 0 {
		if err := a.persist(ctx, done, "ASSIGNED"); err != nil {
			return true, fmt.Errorf("save assignment done: %w", err)
		}
	}
	if len(done) < len(moves) {
		return true, fmt.Errorf("%d of %d channels not assigned", len(moves)-len(done), len(moves))
	}
	return true, nil
}

// layout is the policy's input from memory, with a copy of the channels.
func (a *assigner) layout() (policy.Layout, map[string]pchState) {
	colls := a.cat.collectionsByPChannel()
	a.mu.Lock()
	defer a.mu.Unlock()
	l := policy.Layout{NowMs: time.Now().UnixMilli()}
	for id := range a.nodes {
		l.Nodes = append(l.Nodes, id)
	}
	snap := make(map[string]pchState, len(a.chans))
	for _, n := range a.names {
		c := a.chans[n]
		snap[n] = *c
		ch := policy.Channel{Name: n, Collections: colls[n], LastAssignMs: c.lastAssignMs}
		if c.state == "ASSIGNED" && a.nodes[c.node] != nil {
			ch.Node = c.node
		}
		l.Channels = append(l.Channels, ch)
	}
	return l, snap
}

// persist writes the moves' records in the given state, at most
// maxTxnOps per transaction, each fenced by the session and by every
// key's revision; then applies them to memory and publishes.
func (a *assigner) persist(ctx context.Context, moves []*move, state string) error {
	for len(moves) > 0 {
		chunk := moves[:min(len(moves), maxTxnOps)]
		moves = moves[len(chunk):]
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		for _, m := range chunk {
			key := pchannelPrefix + m.name
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", m.rev))
			ops = append(ops, putProto(key, &coordpb.PChannel{Name: m.name, Term: m.term, State: state, NodeId: m.to.Id,
				NodeAddress: m.to.Address, AccessMode: "RW", LastAssignUnixMs: time.Now().UnixMilli()}))
		}
		rev, err := a.kv.txnRev(ctx, cmps, ops)
		if err != nil {
			return err
		}
		now := time.Now().UnixMilli()
		a.mu.Lock()
		for _, m := range chunk {
			m.rev = rev
			c := a.chans[m.name]
			c.term, c.state, c.node, c.rev = m.term, state, m.to.Id, rev
			if state == "ASSIGNED" {
				c.lastAssignMs = now
			}
		}
		a.publishLocked()
		a.mu.Unlock()
	}
	return nil
}

// callNodes removes the channel from its previous owner (best effort,
// 500 ms, when that node's session ended) and assigns it on the new one.
func (a *assigner) callNodes(ctx context.Context, m *move) error {
	if m.from != nil && m.from.Id != m.to.Id {
		timeout := 10 * time.Second
		if m.from.State == "DOWN" {
			timeout = 500 * time.Millisecond
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := a.conns.remove(rctx, m.from, m.name, m.fromTerm)
		cancel()
		if err != nil && m.from.State != "DOWN" {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return a.conns.assign(rctx, m.to, m.name, m.term)
}

// WatchAssignments sends the full view of every version newer than the
// one the watcher holds, from memory.
func (a *assigner) WatchAssignments(req *coordpb.WatchAssignmentsRequest, stream grpc.ServerStreamingServer[coordpb.AssignmentUpdate]) error {
	var held uint64
	if v := req.FromVersion; v != nil && v.Global == 1 {
		held = v.Local
	}
	for {
		a.mu.Lock()
		view, ch := a.view, a.changed
		a.mu.Unlock()
		if view.Version.Local > held {
			if err := stream.Send(view); err != nil {
				return err
			}
			held = view.Version.Local
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-ch:
		}
	}
}

// collectionsByPChannel lists the collection of every VChannel per
// PChannel (a VChannel is named <pchannel>_<collection>v<n>).
func (c *catalog) collectionsByPChannel() map[string][]int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string][]int64{}
	for name, v := range c.vchannels {
		if i := strings.LastIndex(name, "_"); i > 0 {
			out[name[:i]] = append(out[name[:i]], v.collection)
		}
	}
	return out
}

// snConns keeps one connection per streaming node address.
type snConns struct {
	mu sync.Mutex
	m  map[string]*grpc.ClientConn
}

func (s *snConns) client(addr string) (coordpb.StreamingNodeServiceClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.m[addr]; c != nil {
		return coordpb.NewStreamingNodeServiceClient(c), nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial streaming node %s: %w", addr, err)
	}
	s.m[addr] = c
	return coordpb.NewStreamingNodeServiceClient(c), nil
}

func (s *snConns) assign(ctx context.Context, n *coordpb.StreamingNode, pch string, term int64) error {
	cl, err := s.client(n.Address)
	if err != nil {
		return err
	}
	_, err = cl.Assign(ctx, &coordpb.AssignRequest{Pchannel: pch, Term: term, AccessMode: "RW", CoordTerm: 1, NodeId: n.Id, Epoch: n.Epoch})
	if err != nil {
		return fmt.Errorf("assign %s@%d on node %d: %w", pch, term, n.Id, err)
	}
	return nil
}

func (s *snConns) remove(ctx context.Context, n *coordpb.StreamingNode, pch string, term int64) error {
	cl, err := s.client(n.Address)
	if err != nil {
		return err
	}
	_, err = cl.Remove(ctx, &coordpb.RemoveRequest{Pchannel: pch, Term: term, CoordTerm: 1, NodeId: n.Id, Epoch: n.Epoch})
	if err != nil {
		return fmt.Errorf("remove %s@%d from node %d: %w", pch, term, n.Id, err)
	}
	return nil
}

func (s *snConns) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.m {
		c.Close()
	}
}
