package broadcaster

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/security"
	"github.com/coordd/coordd/testutil"
)

// tlsAppendNode is a streaming node that accepts every coordinator Append
// and, like an older node, does not serve AppendBatch (coordd falls back
// to single Appends); tlsBatchNode serves both.
type tlsAppendNode struct {
	coordpb.UnimplementedStreamingNodeServiceServer
}

func (tlsAppendNode) Append(context.Context, *coordpb.AppendRequest) (*coordpb.AppendResponse, error) {
	return &coordpb.AppendResponse{Id: &coordpb.MessageID{Term: 2, Offset: 7}, Timestamp: 70}, nil
}

type tlsBatchNode struct{ tlsAppendNode }

func (n tlsBatchNode) AppendBatch(ctx context.Context, req *coordpb.AppendBatchRequest) (*coordpb.AppendBatchResponse, error) {
	out := &coordpb.AppendBatchResponse{}
	for _, it := range req.Items {
		r, _ := n.Append(ctx, it)
		out.Results = append(out.Results, &coordpb.AppendBatchResult{Response: r})
	}
	return out, nil
}

// serveNodeTLS serves svc over TLS with the certificate of node identity
// id from pki, on a loopback port, until the test ends.
func serveNodeTLS(t *testing.T, pki security.DevPKI, id int, svc coordpb.StreamingNodeServiceServer) string {
	t.Helper()
	mat, err := security.Load(pki.Node(id))
	if err != nil {
		t.Fatal(err)
	}
	serve, err := mat.StreamingNodeServer()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serve)))
	coordpb.RegisterStreamingNodeServiceServer(srv, svc)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestEveryAppendPathChecksTheNodesCertificate: each way coordd's
// broadcaster writes to a streaming node — Append, AppendBatch, and
// AppendBatch falling back to Appends on a node without it — checks over
// real TLS that the certificate the node served may speak for the
// registration it meant (docs/security.md#per-node-identity): an answer
// from node identity 3's certificate is a checkpoint for a registration
// bound to 3 (or to none) and a PermissionDenied failure, for every item,
// for one bound to 4, so no target is acked by another node's WAL.
func TestEveryAppendPathChecksTheNodesCertificate(t *testing.T) {
	pki, err := security.WriteDevPKI(filepath.Join(t.TempDir(), "pki"), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	coordd, err := security.Load(pki.Server)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS := security.StreamingNodeClient(coordd.APIClient(""))
	batchAddr := serveNodeTLS(t, pki, 3, tlsBatchNode{})
	singleAddr := serveNodeTLS(t, pki, 3, tlsAppendNode{})
	items := []AppendItem{{VChannel: "dml_0_5v0", PChannelTerm: 2}, {VChannel: "dml_0_6v0", PChannelTerm: 2}}

	paths := []struct {
		name string
		addr string
		call func(ctx context.Context, a *GRPCAppender, node NodeTarget) []error
	}{
		{name: "Append", addr: singleAddr, call: func(ctx context.Context, a *GRPCAppender, node NodeTarget) []error {
			_, err := a.Append(ctx, node, items[0].VChannel, items[0].PChannelTerm, []byte("x"), 11, false, 5)
			return []error{err}
		}},
		{name: "AppendBatch", addr: batchAddr, call: func(ctx context.Context, a *GRPCAppender, node NodeTarget) []error {
			return batchErrors(a.AppendBatch(ctx, node, items, []byte("x"), 11, false, 5))
		}},
		{name: "AppendBatch on a node without it", addr: singleAddr, call: func(ctx context.Context, a *GRPCAppender, node NodeTarget) []error {
			return batchErrors(a.AppendBatch(ctx, node, items, []byte("x"), 11, false, 5))
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(10*time.Second))
			defer cancel()
			// A fresh appender per path: the fallback remembers nodes
			// without AppendBatch.
			a := NewGRPCAppender(clientTLS)
			defer a.Close()
			for _, bound := range []uint64{3, 0} {
				for i, err := range p.call(ctx, a, NodeTarget{Addr: p.addr, ID: 1, Epoch: 1, Bound: bound}) {
					if err != nil {
						t.Fatalf("item %d to a registration bound to %d, answered by node identity 3: %v", i, bound, err)
					}
				}
			}
			errs := p.call(ctx, a, NodeTarget{Addr: p.addr, ID: 1, Epoch: 1, Bound: 4})
			for i, err := range errs {
				if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), security.ErrWrongNode.Error()) {
					t.Fatalf("item %d to a registration bound to 4, answered by node identity 3: %v, want PermissionDenied (%v)",
						i, err, security.ErrWrongNode)
				}
			}
		})
	}
}

func batchErrors(results []AppendResult) []error {
	errs := make([]error, len(results))
	for i, r := range results {
		errs[i] = r.Err
	}
	return errs
}
