package grpcserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/milvuspb"
	"github.com/coordd/coordd/api/tokens"
	"github.com/coordd/coordd/controller/allocator"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/controller/manifest"
	"github.com/coordd/coordd/controller/membership"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/logging"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/redial"
)

// Server implements every coordd gRPC service on one node.
type Server struct {
	coordpb.UnimplementedClusterServer
	coordpb.UnimplementedAllocatorServer
	coordpb.UnimplementedChannelsServer
	coordpb.UnimplementedStreamingNodeRegistryServer
	coordpb.UnimplementedBroadcasterServer
	coordpb.UnimplementedDataCoordServer
	coordpb.UnimplementedTokensServer
	coordpb.UnimplementedManifestServiceServer
	coordpb.UnimplementedDiagnosticsServer
	coordpb.UnimplementedBackupServer

	node       *raftnode.Node
	self       raftnode.Self
	tso        *allocator.TSO
	ids        *allocator.IDs
	logger     hclog.Logger
	logs       *logging.Logs
	grpcHealth *health.Server

	health     routines.Sessions   // nodehealth.Tracker, or a test's double
	broadcasts routines.Broadcasts // nil: this member has no broadcaster
	dataPath   *datapath.Service   // the data path's use cases (write path, sessions, imports)
	manifests  *manifest.Committer
	channels   *channels.Service
	membership *membership.Service
	tokens     *tokens.Service
	onPanic    PanicObserver
	watchers   atomic.Int64
	closed     chan struct{}
	// statusMembers is Status's member list while membership is unchanged.
	statusMembers statusMembers

	maxWatchers int64
	maxWait     time.Duration
	limitCounters

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // leader gRPC address → connection

	auth    *auth.Authenticator // nil: authentication disabled (--insecure)
	peerTLS *tls.Config         // nil: forward to the leader in plaintext
}

// Option configures a Server.
type Option func(*Server)

// Watchers is the number of open assignment streams on this node.
func (s *Server) Watchers() int64 { return s.watchers.Load() }

// New wires a server around a node and the services and controllers
// routines.New built for it (their leader routine is registered by the
// caller, see cmd/coordd); tests put their fakes into the routines.Config
// (routines.Doubles), so the server is built the same way for both. The
// membership service is built here, over the raft node: it needs raft's
// membership, which controller/routines does not see; so is the Tokens
// service, whose token format is api/auth's.
func New(node *raftnode.Node, self raftnode.Self, logger hclog.Logger, set *routines.Set, opts ...Option) *Server {
	s := &Server{
		node:       node,
		self:       self,
		tso:        set.TSO,
		ids:        set.IDs,
		manifests:  set.Manifests,
		membership: membership.New(raftMembership{node}, node, self.ID),
		tokens:     tokens.New(node),
		health:     set.Sessions,
		broadcasts: set.Broadcasts,
		channels:   set.Channels,
		dataPath:   set.DataPath,
		logger:     logger,
		grpcHealth: health.NewServer(),
		conns:      map[string]*grpc.ClientConn{},
		closed:     make(chan struct{}),

		maxWatchers: DefaultMaxWatchers,
		maxWait:     DefaultMaxWait,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Register adds the coordd services, the standard health service and
// server reflection to g.
func (s *Server) Register(g *grpc.Server) {
	coordpb.RegisterClusterServer(g, s)
	coordpb.RegisterAllocatorServer(g, s)
	coordpb.RegisterChannelsServer(g, s)
	coordpb.RegisterStreamingNodeRegistryServer(g, s)
	coordpb.RegisterBroadcasterServer(g, s)
	coordpb.RegisterDataCoordServer(g, s)
	coordpb.RegisterTokensServer(g, s)
	coordpb.RegisterManifestServiceServer(g, s)
	coordpb.RegisterDiagnosticsServer(g, s)
	coordpb.RegisterBackupServer(g, s)
	// Milvus 2.6's StreamingCoord services (docs/milvus.md).
	ms := &milvusServer{s: s}
	milvuspb.RegisterStreamingCoordBroadcastServiceServer(g, ms)
	milvuspb.RegisterStreamingCoordAssignmentServiceServer(g, ms)
	healthpb.RegisterHealthServer(g, s.grpcHealth)
	reflection.Register(g)
	s.grpcHealth.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
}

// Close releases forwarding connections.
func (s *Server) Close() {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.grpcHealth.Shutdown()
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

func (s *Server) leaderHint() (id, grpcAddr string) { return s.leaderHintIn(s.node.State()) }

// leaderHintIn is leaderHint with the leader's address read from st (a
// caller answering from one state reads everything from it).
func (s *Server) leaderHintIn(st *fsm.State) (id, grpcAddr string) {
	id, _ = s.node.Leader()
	if id == "" {
		return "", ""
	}
	if m, ok := st.Member(id); ok {
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
		redial.Wake(c) // the client retries this call on its own schedule
		return c, true, nil
	}
	creds := insecure.NewCredentials()
	if s.peerTLS != nil {
		creds = credentials.NewTLS(s.peerTLS)
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds), redial.Option(0))
	if err != nil {
		return nil, false, fmt.Errorf("dial leader %s at %s: %w", id, addr, err)
	}
	// Only the current leader's connection is worth keeping: addresses
	// of earlier leaders (or of members since moved) are dropped.
	for old, oc := range s.conns {
		_ = oc.Close()
		delete(s.conns, old)
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
	target, _ := s.node.Leader()
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	moved := make(chan struct{})
	go s.cancelOnLeaderChange(fctx, target, cancel, moved)
	// The caller's role travels with the call: the leader checks it again,
	// so forwarding never runs a call with more than the caller's rights.
	out := auth.OutgoingCaller(ctx, metadata.AppendToOutgoingContext(fctx, MDForwarded, s.self.ID))
	var trailer metadata.MD
	resp, err = call(out, conn, grpc.Trailer(&trailer))
	if len(trailer) > 0 {
		_ = grpc.SetTrailer(ctx, trailer)
	}
	select {
	case <-moved:
		if err != nil && ctx.Err() == nil {
			// The leader we forwarded to was replaced while the call was in
			// flight (it may be paused or partitioned): the write may or may
			// not have happened; the caller retries against the new leader.
			err = s.toStatus(ctx, fmt.Errorf("leader %s was replaced during a forwarded call: %w: %v",
				target, raftnode.ErrOutcomeUnknown, err))
		}
	default:
	}
	return resp, true, err
}

// cancelOnLeaderChange cancels a forwarded call once this node learns of a
// leader other than target, so a call stuck on a deposed (paused,
// partitioned) leader does not hold the caller for its whole deadline.
func (s *Server) cancelOnLeaderChange(ctx context.Context, target string, cancel context.CancelFunc, moved chan<- struct{}) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if id, _ := s.node.Leader(); id != "" && id != target {
				close(moved)
				cancel()
				return
			}
		}
	}
}
