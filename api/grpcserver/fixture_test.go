package grpcserver

import (
	"context"
	"net"
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

// Every wait in these tests is bounded by one of these.
const (
	readyTimeout = 15 * time.Second // leader elected, established, registered
	callTimeout  = 10 * time.Second // one RPC
)

// testNode is a real single-member coordd cluster in this process: a
// raftnode on a temporary data dir with an in-memory raft transport, the
// gRPC services on a 127.0.0.1:0 listener, and a client connection to them.
type testNode struct {
	node    *raftnode.Node
	srv     *Server
	grpc    *grpc.Server
	self    raftnode.Self
	conn    *grpc.ClientConn
	cluster coordpb.ClusterClient
	alloc   coordpb.AllocatorClient
}

// testLogger is silent unless COORDD_TEST_LOG is set.
func testLogger(t *testing.T) hclog.Logger {
	if os.Getenv("COORDD_TEST_LOG") == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: os.Stderr})
}

// startTestNode starts the member, bootstraps it as a one-member cluster,
// waits until it is the established leader and registers its addresses.
// Everything is stopped by t.Cleanup.
func startTestNode(t *testing.T) *testNode {
	t.Helper()
	tn := startTestNodeWith(t)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	self := tn.self
	if _, err := tn.cluster.RegisterMember(ctx, &coordpb.RegisterMemberRequest{
		Id: self.ID, RaftAddr: self.RaftAddr, GrpcAddr: self.GRPCAddr, HttpAddr: self.HTTPAddr,
	}); err != nil {
		t.Fatalf("RegisterMember: %v", err)
	}
	m, ok := tn.node.State().Member(self.ID)
	if !ok || m.GrpcAddr != self.GRPCAddr || m.HttpAddr != self.HTTPAddr {
		t.Fatalf("after RegisterMember the FSM has %v (found %v); want the registered addresses", m, ok)
	}
	return tn
}

// startTestNodeWith is startTestNode with server options and without the
// member registration.
func startTestNodeWith(t *testing.T, opts ...Option) *testNode {
	t.Helper()
	return startTestNodeCfg(t, routines.Config{}, opts...)
}

// startTestNodeCfg starts the member with controllers built from rc (no
// balancer or broadcaster unless rc sets them) registered as its leader
// routine, as cmd/coordd does, and the server built with opts.
func startTestNodeCfg(t *testing.T, rc routines.Config, opts ...Option) *testNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	// The raft transport is in memory: its address is never dialled, but it
	// must be a valid host:port because it is recorded in the FSM.
	self := raftnode.Self{ID: "n1", RaftAddr: "127.0.0.1:1", GRPCAddr: lis.Addr().String(), HTTPAddr: "127.0.0.1:2"}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(self.RaftAddr))
	logger := testLogger(t)
	node, err := raftnode.Open(raftnode.Config{ID: self.ID, DataDir: t.TempDir(), RaftAddr: self.RaftAddr, Transport: trans, Logger: logger})
	if err != nil {
		lis.Close()
		t.Fatalf("open node: %v", err)
	}
	set, err := routines.New(node, rc)
	if err != nil {
		lis.Close()
		node.Shutdown()
		t.Fatalf("controllers: %v", err)
	}
	tn := &testNode{node: node, self: self}
	t.Cleanup(func() {
		if tn.conn != nil {
			tn.conn.Close()
		}
		tn.grpc.Stop()
		tn.srv.Close()
		set.Close()
		if err := node.Shutdown(); err != nil {
			t.Errorf("node shutdown: %v", err)
		}
	})
	// The leader routine must be registered before the node can lead.
	node.AddLeaderRoutine(routines.Name, set.Run)
	tn.srv = New(node, self, logger.Named("api"), set, opts...)
	tn.grpc = grpc.NewServer(append(tn.srv.AuthInterceptors(), tn.srv.RecoveryInterceptors()...)...)
	tn.srv.Register(tn.grpc)
	go func() { _ = tn.grpc.Serve(lis) }()
	if err := node.Bootstrap([]raftnode.Peer{{ID: self.ID, RaftAddr: self.RaftAddr}}); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	if tn.conn, err = grpc.NewClient(self.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatalf("dial %s: %v", self.GRPCAddr, err)
	}
	tn.cluster = coordpb.NewClusterClient(tn.conn)
	tn.alloc = coordpb.NewAllocatorClient(tn.conn)
	testutil.EventuallyWithin(t, readyTimeout, "node to become the established leader", func() bool { return node.EstablishedTerm() != 0 })
	return tn
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}
