// Package apitest starts a real one-member coordd cluster inside a test
// process, for the tests of the API packages (api/grpcserver,
// api/httpgateway) and anything else that needs a serving member without
// spawning a binary.
//
// The member is a raftnode on a temporary data dir with an in-memory raft
// transport, its leader routines built by controller/routines, a gRPC
// server on a 127.0.0.1:0 listener and, when asked, an HTTP server on
// another. The API itself is built by the caller (Config.Serve), so that
// the grpcserver package's own tests can use this kit without an import
// cycle. Start returns once the member is the established leader and,
// unless Config.SkipRegister, has registered its addresses in the FSM.
package apitest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/testutil"
)

// Bounds of the start-up waits, before testutil's multiplier.
const (
	// ReadyTimeout bounds leader election and establishment.
	ReadyTimeout = 15 * time.Second
	// CallTimeout bounds one RPC (RegisterMember here; tests reuse it).
	CallTimeout = 10 * time.Second
)

// Services is the API a test serves on the member: what Config.Serve
// builds.
type Services struct {
	// Register adds the gRPC services to the kit's gRPC server (nil: none).
	Register func(*grpc.Server)
	// GRPCOptions are passed to grpc.NewServer (interceptors, limits).
	GRPCOptions []grpc.ServerOption
	// HTTP is served on Node.HTTP when Config.HTTP is set.
	HTTP http.Handler
	// Close releases what Serve built; it runs after both servers stop and
	// before the leader routines and the node are shut down.
	Close func()
}

// Config describes the member.
type Config struct {
	// ID and RaftAddr name the member (defaults "n1" and "127.0.0.1:1").
	// The raft transport is in memory, so RaftAddr is never dialled, but
	// it must be a valid host:port because the FSM records it.
	ID, RaftAddr string
	// Logger defaults to TestLogger's (silent unless COORDD_TEST_LOG).
	Logger hclog.Logger
	// Routines configures the leader's controllers (no balancer or
	// broadcaster unless set).
	Routines routines.Config
	// HTTP gives the member an HTTP listener (Node.HTTP) serving
	// Services.HTTP; without it Self.HTTPAddr is a placeholder.
	HTTP bool
	// Serve builds the API of the opened member, before it is
	// bootstrapped: observers installed here see every entry.
	Serve func(n *Node) (Services, error)
	// SkipRegister leaves the member's addresses out of the FSM (no
	// RegisterMember call after leadership).
	SkipRegister bool
	// LeaderLease is raftnode.Config.LeaderLease (0: off, every
	// VerifyLeader runs a quorum round; a member started with
	// --lease-reads runs with one).
	LeaderLease time.Duration
	// StateBudget is raftnode.Config.StateBudget, the memory guard's
	// budget (0: off).
	StateBudget int64
}

// Node is the running member. Its fields are set by Start and read-only.
type Node struct {
	Raft     *raftnode.Node
	Self     raftnode.Self
	Routines *routines.Set
	Logger   hclog.Logger
	DataDir  string
	// GRPC serves Services.Register on Self.GRPCAddr; Conn is a client
	// connection to it.
	GRPC *grpc.Server
	Conn *grpc.ClientConn
	// HTTP is nil unless Config.HTTP; its client is HTTP.Client().
	HTTP *httptest.Server

	closers []func() error // run in reverse order by Close
}

// TestLogger is silent unless COORDD_TEST_LOG is set, then it logs at
// debug level to stderr under name.
func TestLogger(name string) hclog.Logger {
	if os.Getenv("COORDD_TEST_LOG") == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: os.Stderr})
}

// StartT is Start for one test: it fails t when the member cannot start
// and stops it with t.Cleanup.
func StartT(t testing.TB, cfg Config) *Node {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = TestLogger(t.Name())
	}
	n, err := Start(cfg)
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("apitest: close: %v", err)
		}
	})
	return n
}

// Start starts the member and waits until it is ready (see the package
// doc). The caller must Close it; on error everything started is stopped.
func Start(cfg Config) (n *Node, err error) {
	if cfg.ID == "" {
		cfg.ID = "n1"
	}
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = "127.0.0.1:1"
	}
	if cfg.Logger == nil {
		cfg.Logger = TestLogger("apitest-" + cfg.ID)
	}
	n = &Node{Logger: cfg.Logger}
	defer func() {
		if err != nil {
			_ = n.Close()
			n = nil
		}
	}()
	if err := n.open(cfg); err != nil {
		return n, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(ReadyTimeout))
	defer cancel()
	if err := WaitEstablished(ctx, n.Raft); err != nil {
		return n, err
	}
	if cfg.SkipRegister {
		return n, nil
	}
	return n, n.register()
}

// open builds every part, registers its teardown and bootstraps the
// member.
func (n *Node) open(cfg Config) error {
	dir, err := os.MkdirTemp("", "coordd-apitest-")
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	n.DataDir = dir
	n.closers = append(n.closers, func() error { return os.RemoveAll(dir) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	n.closers = append(n.closers, func() error { lis.Close(); return nil })
	n.Self = raftnode.Self{ID: cfg.ID, RaftAddr: cfg.RaftAddr, GRPCAddr: lis.Addr().String(), HTTPAddr: "127.0.0.1:2"}
	if cfg.HTTP {
		n.HTTP = httptest.NewUnstartedServer(nil) // listens on 127.0.0.1:0
		n.closers = append(n.closers, func() error { n.HTTP.Listener.Close(); return nil })
		n.Self.HTTPAddr = n.HTTP.Listener.Addr().String()
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(n.Self.RaftAddr))
	n.Raft, err = raftnode.Open(raftnode.Config{ID: n.Self.ID, DataDir: dir, RaftAddr: n.Self.RaftAddr, Transport: trans, Logger: n.Logger,
		LeaderLease: cfg.LeaderLease, StateBudget: cfg.StateBudget})
	if err != nil {
		return fmt.Errorf("open node: %w", err)
	}
	n.closers = append(n.closers, n.Raft.Shutdown)
	if cfg.Routines.Logger == nil {
		cfg.Routines.Logger = n.Logger.Named("channels")
	}
	if n.Routines, err = routines.New(n.Raft, cfg.Routines); err != nil {
		return fmt.Errorf("controllers: %w", err)
	}
	n.closers = append(n.closers, func() error { n.Routines.Close(); return nil })
	// The leader routine must be registered before the node can lead.
	n.Raft.AddLeaderRoutine(routines.Name, n.Routines.Run)
	if err := n.serve(cfg, lis); err != nil {
		return err
	}
	if err := n.Raft.Bootstrap([]raftnode.Peer{{ID: n.Self.ID, RaftAddr: n.Self.RaftAddr}}); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}

// serve builds the caller's services and starts both servers and the
// client connection.
func (n *Node) serve(cfg Config, lis net.Listener) error {
	var svc Services
	if cfg.Serve != nil {
		var err error
		if svc, err = cfg.Serve(n); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	if svc.Close != nil {
		n.closers = append(n.closers, func() error { svc.Close(); return nil })
	}
	n.GRPC = grpc.NewServer(svc.GRPCOptions...)
	if svc.Register != nil {
		svc.Register(n.GRPC)
	}
	n.closers = append(n.closers, func() error { n.GRPC.Stop(); return nil })
	go func() { _ = n.GRPC.Serve(lis) }()
	if n.HTTP != nil {
		if svc.HTTP == nil {
			return errors.New("Config.HTTP is set but Serve built no HTTP handler")
		}
		n.HTTP.Config.Handler = svc.HTTP
		n.HTTP.Start()
		n.closers = append(n.closers, func() error { n.HTTP.Close(); return nil })
	}
	conn, err := grpc.NewClient(n.Self.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", n.Self.GRPCAddr, err)
	}
	n.Conn = conn
	n.closers = append(n.closers, func() error { conn.Close(); return nil })
	return nil
}

// register records the member's addresses through the Cluster service and
// checks the FSM holds them.
func (n *Node) register() error {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(CallTimeout))
	defer cancel()
	s := n.Self
	if _, err := coordpb.NewClusterClient(n.Conn).RegisterMember(ctx, &coordpb.RegisterMemberRequest{
		Id: s.ID, RaftAddr: s.RaftAddr, GrpcAddr: s.GRPCAddr, HttpAddr: s.HTTPAddr,
	}); err != nil {
		return fmt.Errorf("RegisterMember: %w", err)
	}
	m, ok := n.Raft.State().Member(s.ID)
	if !ok || m.GrpcAddr != s.GRPCAddr || m.HttpAddr != s.HTTPAddr {
		return fmt.Errorf("after RegisterMember the FSM has %v (found %v); want the registered addresses", m, ok)
	}
	return nil
}

// Close stops everything Start started, newest first: the client
// connection, the servers, the services, the leader routines, the node and
// its data dir. It returns the node's shutdown error. Safe to call twice.
func (n *Node) Close() error {
	var errs []error
	for i := len(n.closers) - 1; i >= 0; i-- {
		errs = append(errs, n.closers[i]())
	}
	n.closers = nil
	return errors.Join(errs...)
}

// WaitEstablished waits until node is the established leader of its term
// (its leader routines have started), or ctx ends.
func WaitEstablished(ctx context.Context, node *raftnode.Node) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for node.EstablishedTerm() == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("no established leader: %w", ctx.Err())
		case <-node.Done():
			return raftnode.ErrShuttingDown
		case <-tick.C:
		}
	}
	return nil
}
