package grpcserver

import (
	"context"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/logging"
	"github.com/coordd/coordd/raftnode"
)

// benchServer is a Server with what the interceptors and GetLogLevel (the
// bench's no-op RPC) use, logging at info to nowhere as a member does.
func benchServer(b *testing.B) *Server {
	b.Helper()
	logs, err := logging.New(logging.Options{Name: "coordd", Level: "info", Output: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	return &Server{logger: logs.Logger(), logs: logs, self: raftnode.Self{ID: "n1"}, maxWait: DefaultMaxWait,
		closed: make(chan struct{}), conns: map[string]*grpc.ClientConn{}}
}

// BenchmarkNoopInterceptors is the cost coordd's unary chain adds to a
// no-op call (GetLogLevel), against calling the handler as a plain gRPC
// server does: "chain" runs the chain's functions in process, "rpc" makes
// the call over loopback (8 concurrent callers per core) to a plain
// grpc.Server and to one built with coordd's options (insecure, as the
// bench runs: no auth interceptor). Figures in bench/RESULTS.md.
func BenchmarkNoopInterceptors(b *testing.B) {
	s := benchServer(b)
	info := &grpc.UnaryServerInfo{FullMethod: coordpb.Diagnostics_GetLogLevel_FullMethodName}
	handler := func(ctx context.Context, req any) (any, error) {
		return s.GetLogLevel(ctx, req.(*coordpb.GetLogLevelRequest))
	}
	req := &coordpb.GetLogLevelRequest{}
	b.Run("chain/plain", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for i := 0; i < b.N; i++ {
			if _, err := handler(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chain/coordd", func(b *testing.B) {
		b.ReportAllocs()
		unary, recovery := s.UnaryInterceptor(), s.recoveryUnary
		ctx := context.Background()
		for i := 0; i < b.N; i++ {
			_, err := unary(ctx, req, info, func(ctx context.Context, req any) (any, error) {
				return recovery(ctx, req, info, handler)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tc := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"rpc/plain", nil},
		{"rpc/coordd", append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(s.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(s.StreamInterceptor())}, s.RecoveryInterceptors()...)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := grpc.NewServer(tc.opts...)
			coordpb.RegisterDiagnosticsServer(g, s)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go g.Serve(lis)
			defer g.Stop()
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			cl := coordpb.NewDiagnosticsClient(conn)
			if _, err := cl.GetLogLevel(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := cl.GetLogLevel(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
