package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
)

// Simulated streaming nodes for w6, the same for both systems: each node
// is a loopback listener of one in-process gRPC server whose
// StreamingNodeService answers Assign and Remove at once (no WAL is
// opened, no term is checked). A node joins with RegisterStreamingNode and
// then heartbeats every second (first as soon as the nodes' own
// assignment watcher holds the registration version, which coordd needs
// before it gives the node channels), and leaves with Deregister.

// snAnswer is the simulated StreamingNodeService.
type snAnswer struct {
	coordpb.UnimplementedStreamingNodeServiceServer
	assigns, removes atomic.Int64
}

func (a *snAnswer) Assign(context.Context, *coordpb.AssignRequest) (*coordpb.AssignResponse, error) {
	a.assigns.Add(1)
	return &coordpb.AssignResponse{}, nil
}

func (a *snAnswer) Remove(context.Context, *coordpb.RemoveRequest) (*coordpb.RemoveResponse, error) {
	a.removes.Add(1)
	return &coordpb.RemoveResponse{}, nil
}

// simNode is one simulated streaming node at a fixed address; each join
// is a new process lifetime (incarnation) there.
type simNode struct {
	addr string
	reg  coordpb.StreamingNodeRegistryClient
	self *client.Watcher

	mu        sync.Mutex
	joins     int
	id, epoch uint64
	stopHB    context.CancelFunc
	hbDone    chan struct{}
}

func (n *simNode) joined() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.id != 0
}

// join registers the node and starts its heartbeats; it returns the node ID.
func (n *simNode) join(ctx context.Context) (uint64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.id != 0 {
		return 0, fmt.Errorf("sim node %s already joined as %d", n.addr, n.id)
	}
	n.joins++
	resp, err := n.reg.RegisterStreamingNode(ctx, &coordpb.RegisterStreamingNodeRequest{Address: n.addr,
		Incarnation: fmt.Sprintf("sim-%s-%d", n.addr, n.joins)})
	if err != nil {
		return 0, fmt.Errorf("register %s: %w", n.addr, err)
	}
	n.id, n.epoch = resp.NodeId, resp.Epoch
	hctx, cancel := context.WithCancel(context.Background())
	n.stopHB, n.hbDone = cancel, make(chan struct{})
	go n.heartbeat(hctx, resp.NodeId, resp.Epoch, client.Version{Global: resp.RegisteredVersion.GetGlobal(),
		Local: resp.RegisteredVersion.GetLocal()}, n.hbDone)
	return resp.NodeId, nil
}

// heartbeat: the first one once the nodes' watcher holds the
// registration version (or after one interval without it), then one per
// second until ctx ends or the session is unknown.
func (n *simNode) heartbeat(ctx context.Context, id, epoch uint64, registered client.Version, done chan struct{}) {
	defer close(done)
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	for wctx.Err() == nil {
		v := n.self.View()
		if v != nil && !v.Version.Less(registered) {
			break
		}
		var have client.Version
		if v != nil {
			have = v.Version
		}
		_, _ = n.self.WaitNewer(wctx, have)
	}
	cancel()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		req := &coordpb.HeartbeatRequest{NodeId: id, Epoch: epoch}
		if v := n.self.View(); v != nil {
			req.SeenVersion = &coordpb.Version{Global: v.Version.Global, Local: v.Version.Local}
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := n.reg.Heartbeat(cctx, req)
		cancel()
		if status.Code(err) == codes.NotFound {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// leave deregisters the node and stops its heartbeats; it returns the ID
// it had and the PChannels the nodes' own watcher saw it hold.
func (n *simNode) leave(ctx context.Context) (uint64, []string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.id == 0 {
		return 0, nil, fmt.Errorf("sim node %s is not joined", n.addr)
	}
	var held []string
	if v := n.self.View(); v != nil {
		held = v.Assigned(n.id)
	}
	if _, err := n.reg.Deregister(ctx, &coordpb.NodeSessionRequest{NodeId: n.id, Epoch: n.epoch}); err != nil {
		return 0, nil, fmt.Errorf("deregister %d: %w", n.id, err)
	}
	n.stopHB()
	<-n.hbDone
	id := n.id
	n.id, n.epoch = 0, 0
	return id, held, nil
}

// simServer is the gRPC server behind every simulated node of a pool.
type simServer struct {
	srv *grpc.Server
	ans *snAnswer
}

func newSimServer() *simServer {
	s := &simServer{srv: grpc.NewServer(), ans: &snAnswer{}}
	coordpb.RegisterStreamingNodeServiceServer(s.srv, s.ans)
	return s
}

// listen adds a loopback listener (a node's address) to the server.
func (s *simServer) listen() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("sim node listener: %w", err)
	}
	go func() { _ = s.srv.Serve(l) }()
	return l.Addr().String(), nil
}
