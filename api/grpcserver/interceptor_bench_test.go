package grpcserver

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

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
// bench runs: no auth interceptor), alternating between them. Figures in
// bench/RESULTS.md.
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
	for _, chain := range []struct {
		name  string
		unary grpc.UnaryServerInterceptor
	}{{"chain/coordd", s.UnaryInterceptor()}, {"chain/before", s.unaryBefore()}} {
		b.Run(chain.name, func(b *testing.B) {
			b.ReportAllocs()
			unary, recovery := chain.unary, s.recoveryUnary
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
	}
	b.Run("rpc", func(b *testing.B) {
		// Both servers at once; every caller alternates between them, so
		// a loaded machine slows both alike.
		plain := benchRPCClient(b, s)
		chained := benchRPCClient(b, s, append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(s.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(s.StreamInterceptor())}, s.RecoveryInterceptors()...)...)
		before := benchRPCClient(b, s, append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(s.unaryBefore()),
			grpc.ChainStreamInterceptor(s.StreamInterceptor())}, s.RecoveryInterceptors()...)...)
		var ns [3]atomic.Int64
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for i, cl := range []coordpb.DiagnosticsClient{plain, chained, before} {
					t0 := time.Now()
					if _, err := cl.GetLogLevel(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
					ns[i].Add(int64(time.Since(t0)))
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(ns[0].Load())/float64(b.N)/1000, "plain-us/call")
		b.ReportMetric(float64(ns[1].Load())/float64(b.N)/1000, "coordd-us/call")
		b.ReportMetric(float64(ns[2].Load())/float64(b.N)/1000, "before-us/call")
	})
}

// benchRPCClient serves s's Diagnostics on loopback with opts and returns a
// client of it (stopped when the benchmark ends).
func benchRPCClient(b *testing.B, s *Server, opts ...grpc.ServerOption) coordpb.DiagnosticsClient {
	g := grpc.NewServer(opts...)
	coordpb.RegisterDiagnosticsServer(g, s)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go g.Serve(lis)
	b.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	cl := coordpb.NewDiagnosticsClient(conn)
	if _, err := cl.GetLogLevel(context.Background(), &coordpb.GetLogLevelRequest{}); err != nil {
		b.Fatal(err)
	}
	return cl
}

// unaryBefore is the unary interceptor as it was before the chain was made
// cheap (a timer, a request ID and logger, and the debug line's fields on
// every call), kept here to measure against.
func (s *Server) unaryBefore() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, s.maxWait)
		defer cancel()
		ctx, _ = s.WithRequestLogger(ctx, req)
		start := time.Now()
		resp, err := handler(ctx, req)
		s.log(ctx).Debug("grpc call", "method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start))
		s.LogFailure(ctx, info.FullMethod, req, err)
		return resp, err
	}
}
