package grpcserver

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/allocator"
	"github.com/coordd/coordd/raftnode"
)

// Self is this member's identity and addresses.
type Self struct {
	ID       string
	RaftAddr string
	GRPCAddr string
	HTTPAddr string
}

// Server implements every coordd gRPC service on one node.
type Server struct {
	coordpb.UnimplementedClusterServer
	coordpb.UnimplementedAllocatorServer

	node   *raftnode.Node
	self   Self
	tso    *allocator.TSO
	ids    *allocator.IDs
	logger hclog.Logger
	health *health.Server

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // leader gRPC address → connection
}

// New wires a server around a node. The allocators' leader routine is
// registered on the node here.
func New(node *raftnode.Node, self Self, logger hclog.Logger) *Server {
	s := &Server{
		node:   node,
		self:   self,
		tso:    allocator.NewTSO(node, allocator.TSOConfig{}),
		ids:    allocator.NewIDs(node, 0),
		logger: logger,
		health: health.NewServer(),
		conns:  map[string]*grpc.ClientConn{},
	}
	node.AddLeaderRoutine("tso-window", s.tso.Run)
	return s
}

// Register adds the coordd services, the standard health service and
// server reflection to g.
func (s *Server) Register(g *grpc.Server) {
	coordpb.RegisterClusterServer(g, s)
	coordpb.RegisterAllocatorServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
}

// Close releases forwarding connections.
func (s *Server) Close() {
	s.health.Shutdown()
	s.mu.Lock()
	defer s.mu.Unlock()
	for addr, c := range s.conns {
		c.Close()
		delete(s.conns, addr)
	}
}

// LeaderHint returns the leader's ID and gRPC address as far as this node
// knows them.
func (s *Server) LeaderHint() (id, grpcAddr string) { return s.leaderHint() }

func (s *Server) leaderHint() (id, grpcAddr string) {
	id, _ = s.node.Leader()
	if id == "" {
		return "", ""
	}
	if m, ok := s.node.State().Member(id); ok {
		return id, m.GrpcAddr
	}
	return id, ""
}

// leaderConn returns a connection to the leader for forwarding, or ok=false
// when this node should serve the call itself.
func (s *Server) leaderConn(ctx context.Context) (conn *grpc.ClientConn, ok bool, err error) {
	if s.node.IsLeader() {
		return nil, false, nil
	}
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(MDForwarded)) > 0 {
		// One hop only: a forwarded call that reaches a non-leader fails
		// with a hint instead of bouncing around during an election.
		return nil, false, fmt.Errorf("forwarded call reached a follower: %w", &raftnode.NotLeaderError{})
	}
	id, addr := s.leaderHint()
	if id == "" || addr == "" || id == s.self.ID {
		return nil, false, fmt.Errorf("cannot forward: %w", errNoLeader)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, found := s.conns[addr]; found {
		return c, true, nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, false, fmt.Errorf("dial leader %s at %s: %w", id, addr, err)
	}
	s.conns[addr] = c
	return c, true, nil
}

// forward runs call against the leader when this node is not the leader,
// passing the leader's trailer (hints, outcome marker) back to our caller.
// handled=false means the caller must serve the request locally.
func forward[Resp any](s *Server, ctx context.Context, call func(ctx context.Context, c *grpc.ClientConn, opts ...grpc.CallOption) (Resp, error)) (resp Resp, handled bool, err error) {
	conn, ok, err := s.leaderConn(ctx)
	if err != nil {
		return resp, true, s.toStatus(ctx, err)
	}
	if !ok {
		return resp, false, nil
	}
	out := metadata.AppendToOutgoingContext(ctx, MDForwarded, s.self.ID)
	var trailer metadata.MD
	resp, err = call(out, conn, grpc.Trailer(&trailer))
	if len(trailer) > 0 {
		_ = grpc.SetTrailer(ctx, trailer)
	}
	return resp, true, err
}
