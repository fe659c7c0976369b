package streamingnode

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// fakeCoord is an in-process stand-in for coordd: the registry, the
// assignment stream and the timestamp oracle.
type fakeCoord struct {
	coordpb.UnimplementedStreamingNodeRegistryServer
	coordpb.UnimplementedChannelsServer
	coordpb.UnimplementedAllocatorServer

	addr string
	srv  *grpc.Server

	mu        sync.Mutex
	nextID    uint64
	nodes     map[uint64]*fakeNode
	coordTerm uint64
	calls     []string // "register", "drain", "deregister" in order
	drainLeft int      // RequestDrain answers with the node's channels this many times
	held      []string // what RequestDrain reports while drainLeft > 0
	ts        uint64
	tsCalls   int
	version   *coordpb.Version
	watchers  map[chan *coordpb.AssignmentUpdate]bool
	channels  map[string]*coordpb.ChannelAssignment // the assignment view's channels
	listCalls int                                   // ListPChannels calls
	data      fakeData                              // DataCoord: segment allocation (insert_test.go)
}

type fakeNode struct {
	id, epoch     uint64
	addr, rg, inc string
	down          bool
	heartbeats    int
	seen          *coordpb.Version
	held          map[string]int64 // the last heartbeat's held WALs (nil: not reported)
}

func startFakeCoord(t testing.TB) *fakeCoord {
	t.Helper()
	return startFakeCoordWith(t)
}

// startFakeCoordWith starts a fakeCoord whose server has opts (e.g. TLS
// credentials, for a secure node).
func startFakeCoordWith(t testing.TB, opts ...grpc.ServerOption) *fakeCoord {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCoord{addr: lis.Addr().String(), srv: grpc.NewServer(opts...), nextID: 1, nodes: map[uint64]*fakeNode{},
		coordTerm: 3, ts: 1 << 30, version: &coordpb.Version{Global: 3, Local: 1},
		watchers: map[chan *coordpb.AssignmentUpdate]bool{}, channels: map[string]*coordpb.ChannelAssignment{}}
	coordpb.RegisterStreamingNodeRegistryServer(f.srv, f)
	coordpb.RegisterChannelsServer(f.srv, f)
	coordpb.RegisterAllocatorServer(f.srv, f)
	coordpb.RegisterDataCoordServer(f.srv, &f.data)
	go f.srv.Serve(lis)
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *fakeCoord) RegisterStreamingNode(_ context.Context, req *coordpb.RegisterStreamingNodeRequest) (*coordpb.RegisterStreamingNodeResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "register")
	for _, n := range f.nodes {
		if n.inc == req.Incarnation && !n.down {
			return &coordpb.RegisterStreamingNodeResponse{NodeId: n.id, Epoch: n.epoch, RegisteredVersion: f.version}, nil
		}
	}
	n := &fakeNode{id: f.nextID, epoch: 100 + f.nextID, addr: req.Address, rg: req.ResourceGroup, inc: req.Incarnation}
	f.nextID++
	f.nodes[n.id] = n
	f.bumpLocked()
	return &coordpb.RegisterStreamingNodeResponse{NodeId: n.id, Epoch: n.epoch, RegisteredVersion: f.version}, nil
}

func (f *fakeCoord) live(id, epoch uint64) (*fakeNode, error) {
	n := f.nodes[id]
	if n == nil || n.down || n.epoch != epoch {
		return nil, status.Errorf(codes.NotFound, "streaming node %d is not registered; register again", id)
	}
	return n, nil
}

func (f *fakeCoord) Heartbeat(_ context.Context, req *coordpb.HeartbeatRequest) (*coordpb.HeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.live(req.NodeId, req.Epoch)
	if err != nil {
		return nil, err
	}
	n.heartbeats++
	n.seen = req.SeenVersion
	n.held = nil
	if req.HeldReported {
		n.held = map[string]int64{}
		for _, h := range req.Held {
			n.held[h.Pchannel] = h.Term
		}
	}
	return &coordpb.HeartbeatResponse{CoordTerm: f.coordTerm, State: "UP", TtlMs: 5000}, nil
}

func (f *fakeCoord) RequestDrain(_ context.Context, req *coordpb.NodeSessionRequest) (*coordpb.NodeSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "drain")
	if _, err := f.live(req.NodeId, req.Epoch); err != nil {
		return nil, err
	}
	if f.drainLeft > 0 {
		f.drainLeft--
		return &coordpb.NodeSessionResponse{State: "DRAINING", Pchannels: f.held}, nil
	}
	return &coordpb.NodeSessionResponse{State: "DRAINING"}, nil
}

func (f *fakeCoord) Deregister(_ context.Context, req *coordpb.NodeSessionRequest) (*coordpb.NodeSessionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "deregister")
	if n, err := f.live(req.NodeId, req.Epoch); err == nil {
		n.down = true
	}
	return &coordpb.NodeSessionResponse{State: "DOWN"}, nil
}

func (f *fakeCoord) AllocTimestamp(_ context.Context, req *coordpb.AllocTimestampRequest) (*coordpb.AllocTimestampResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tsCalls++
	first := f.ts
	f.ts += uint64(req.Count)
	return &coordpb.AllocTimestampResponse{First: first, Count: req.Count}, nil
}

func (f *fakeCoord) WatchAssignments(req *coordpb.WatchAssignmentsRequest, stream grpc.ServerStreamingServer[coordpb.AssignmentUpdate]) error {
	ch := make(chan *coordpb.AssignmentUpdate, 16)
	f.mu.Lock()
	f.watchers[ch] = true
	first := f.viewLocked()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, ch)
		f.mu.Unlock()
	}()
	if err := stream.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case u := <-ch:
			if err := stream.Send(u); err != nil {
				return err
			}
		}
	}
}

// push sends an update with version v to every watcher.
func (f *fakeCoord) push(v *coordpb.Version) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.watchers {
		ch <- &coordpb.AssignmentUpdate{Version: v}
	}
}

// viewLocked is the full view: the version and every live node.
func (f *fakeCoord) viewLocked() *coordpb.AssignmentUpdate {
	u := &coordpb.AssignmentUpdate{Version: proto.Clone(f.version).(*coordpb.Version), Full: true, Cchannel: "dml_0_vcchan"}
	for _, n := range f.nodes {
		if !n.down {
			u.Nodes = append(u.Nodes, &coordpb.StreamingNode{Id: n.id, Address: n.addr, State: "UP", Epoch: n.epoch})
		}
	}
	for _, c := range f.channels {
		u.Channels = append(u.Channels, proto.Clone(c).(*coordpb.ChannelAssignment))
	}
	return u
}

// setChannelQuiet records pchannel at term on node without telling the
// watchers, like an assignment stream from a member that is cut off.
func (f *fakeCoord) setChannelQuiet(pchannel string, term int64, node uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[pchannel] = &coordpb.ChannelAssignment{Pchannel: pchannel, Term: term, State: "ASSIGNING", NodeId: node, AccessMode: "RW"}
}

func (f *fakeCoord) ListPChannels(context.Context, *coordpb.ListPChannelsRequest) (*coordpb.ListPChannelsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listCalls++
	resp := &coordpb.ListPChannelsResponse{Version: proto.Clone(f.version).(*coordpb.Version)}
	for _, c := range f.channels {
		resp.Pchannels = append(resp.Pchannels, &coordpb.PChannel{Name: c.Pchannel, Term: c.Term, State: c.State, NodeId: c.NodeId})
	}
	return resp, nil
}

// setChannel records pchannel at term on node in the assignment view (as
// coordd does before it sends Assign) and publishes the view.
func (f *fakeCoord) setChannel(pchannel string, term int64, node uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[pchannel] = &coordpb.ChannelAssignment{Pchannel: pchannel, Term: term, State: "ASSIGNING", NodeId: node, AccessMode: "RW"}
	f.bumpLocked()
}

func (f *fakeCoord) bumpLocked() {
	f.version = &coordpb.Version{Global: f.version.Global, Local: f.version.Local + 1}
	for ch := range f.watchers {
		select {
		case ch <- f.viewLocked():
		default:
		}
	}
}

func (f *fakeCoord) node(id uint64) fakeNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[id]; n != nil {
		return *n
	}
	return fakeNode{}
}

func (f *fakeCoord) markDown(id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[id].down = true
}

// setCoordTerm makes t coordd's term, as a new leader would: heartbeats
// answer it and the assignment view's version starts a new Global.
func (f *fakeCoord) setCoordTerm(t uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.coordTerm = t
	f.version = &coordpb.Version{Global: t, Local: 0}
	f.bumpLocked()
}

func (f *fakeCoord) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}
