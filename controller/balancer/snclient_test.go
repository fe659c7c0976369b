package balancer

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/security"
)

// tlsNode is a StreamingNodeService that accepts every lifecycle call and
// records whether its caller presented coordd's server identity.
type tlsNode struct {
	coordpb.UnimplementedStreamingNodeServiceServer
	fromServer chan bool
}

func (n *tlsNode) Assign(ctx context.Context, _ *coordpb.AssignRequest) (*coordpb.AssignResponse, error) {
	n.fromServer <- callerIsServer(ctx)
	return &coordpb.AssignResponse{}, nil
}

func (n *tlsNode) Remove(ctx context.Context, _ *coordpb.RemoveRequest) (*coordpb.RemoveResponse, error) {
	n.fromServer <- callerIsServer(ctx)
	return &coordpb.RemoveResponse{}, nil
}

// The gRPC streaming client dials a secure node with TLS, presents
// coordd's server certificate, verifies the node's certificate, and refuses
// an Assign answered by a node whose certificate names another identity
// than the registration's.
func TestGRPCStreamingClientOverTLS(t *testing.T) {
	dir := t.TempDir()
	pki, err := security.WriteDevPKI(filepath.Join(dir, "pki"), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nodeMat, err := security.Load(pki.Node(3))
	if err != nil {
		t.Fatal(err)
	}
	serve, err := nodeMat.StreamingNodeServer()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node := &tlsNode{fromServer: make(chan bool, 8)}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serve)))
	coordpb.RegisterStreamingNodeServiceServer(srv, node)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	coorddMat, err := security.Load(pki.Server)
	if err != nil {
		t.Fatal(err)
	}
	c := newGRPCStreamingClient(security.StreamingNodeClient(coorddMat.APIClient("")))
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := lis.Addr().String()
	for _, bound := range []uint64{3, 0} {
		if err := c.Assign(ctx, NodeTarget{Addr: addr, ID: 1, Epoch: 1, Bound: bound}, "dml_0", 2, logpb.AccessMode_ACCESS_RW, 5); err != nil {
			t.Fatalf("Assign to a node bound to %d: %v", bound, err)
		}
		if !<-node.fromServer {
			t.Fatal("the node did not see coordd's server identity")
		}
	}
	err = c.Assign(ctx, NodeTarget{Addr: addr, ID: 1, Epoch: 1, Bound: 4}, "dml_0", 2, logpb.AccessMode_ACCESS_RW, 5)
	<-node.fromServer
	if !errors.Is(err, security.ErrWrongNode) {
		t.Fatalf("Assign answered by node identity 3 for a registration bound to 4: %v, want ErrWrongNode", err)
	}
	if err := c.Remove(ctx, NodeTarget{Addr: addr, ID: 1, Epoch: 1, Bound: 3}, "dml_0", 1, 5); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if !<-node.fromServer {
		t.Fatal("the node did not see coordd's server identity on Remove")
	}
	// coordd does not accept a server certificate where a node should be.
	impostorLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	imp := grpc.NewServer(grpc.Creds(credentials.NewTLS(coorddMat.APIServer())))
	coordpb.RegisterStreamingNodeServiceServer(imp, node)
	go func() { _ = imp.Serve(impostorLis) }()
	t.Cleanup(imp.Stop)
	if err := c.Assign(ctx, NodeTarget{Addr: impostorLis.Addr().String(), ID: 1, Epoch: 1}, "dml_0", 2, logpb.AccessMode_ACCESS_RW, 5); err == nil {
		t.Fatal("an Assign reached a port serving coordd's server certificate instead of a node's")
	}
}

func callerIsServer(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(ti.State.PeerCertificates) > 0 && security.IsServerCert(ti.State.PeerCertificates[0])
}
