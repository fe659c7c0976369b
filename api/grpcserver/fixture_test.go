package grpcserver

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/apitest"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/raftnode"
)

// Every wait in these tests is bounded by one of these.
const (
	readyTimeout = apitest.ReadyTimeout // leader elected, established, registered
	callTimeout  = apitest.CallTimeout  // one RPC
)

// testNode is a real single-member coordd cluster in this process (see
// package apitest) serving this package's Server, and a client connection
// to it.
type testNode struct {
	node    *raftnode.Node
	srv     *Server
	set     *routines.Set // the member's controllers (routines.New)
	grpc    *grpc.Server
	self    raftnode.Self
	conn    *grpc.ClientConn
	cluster coordpb.ClusterClient
	alloc   coordpb.AllocatorClient
}

// testLogger is silent unless COORDD_TEST_LOG is set.
func testLogger(t *testing.T) hclog.Logger { return apitest.TestLogger(t.Name()) }

// startTestNode starts the member, bootstraps it as a one-member cluster,
// waits until it is the established leader and registers its addresses.
// Everything is stopped by t.Cleanup.
func startTestNode(t *testing.T) *testNode {
	t.Helper()
	return startTestNodeKit(t, apitest.Config{}, nil)
}

// startTestNodeWith is startTestNode with server options and without the
// member registration.
func startTestNodeWith(t *testing.T, opts ...Option) *testNode {
	t.Helper()
	return startTestNodeCfg(t, routines.Config{}, opts...)
}

// startTestNodeCfg starts the member with controllers built from rc (no
// balancer or broadcaster unless rc sets them) registered as its leader
// routine, as cmd/coordd does, and the server built with opts; the member
// is not registered.
func startTestNodeCfg(t *testing.T, rc routines.Config, opts ...Option) *testNode {
	t.Helper()
	return startTestNodeKit(t, apitest.Config{Routines: rc, SkipRegister: true}, opts)
}

func startTestNodeKit(t testing.TB, cfg apitest.Config, opts []Option) *testNode {
	t.Helper()
	tn := &testNode{}
	cfg.Serve = func(n *apitest.Node) (apitest.Services, error) {
		tn.srv = New(n.Raft, n.Self, n.Logger.Named("api"), n.Routines, opts...)
		return apitest.Services{Register: tn.srv.Register, GRPCOptions: append(tn.srv.AuthInterceptors(), tn.srv.RecoveryInterceptors()...), Close: tn.srv.Close}, nil
	}
	n := apitest.StartT(t, cfg)
	tn.node, tn.grpc, tn.self, tn.conn, tn.set = n.Raft, n.GRPC, n.Self, n.Conn, n.Routines
	tn.cluster = coordpb.NewClusterClient(tn.conn)
	tn.alloc = coordpb.NewAllocatorClient(tn.conn)
	return tn
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}
