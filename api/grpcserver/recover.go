package grpcserver

import (
	"context"
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// PanicObserver is told about every handler panic the server recovered
// from: surface is "grpc" or "http", method the RPC or route.
type PanicObserver func(surface, method string)

// WithPanicObserver counts recovered handler panics (a metric).
func WithPanicObserver(o PanicObserver) Option { return func(s *Server) { s.onPanic = o } }

// Recovered turns the value of a recovered handler panic into an Internal
// status: the panic is logged with its stack and counted, and the process
// keeps serving. A panicking handler may have committed a command already,
// so the status says the outcome is unknown. The HTTP gateway calls it for
// its own handlers; gRPC calls go through RecoveryInterceptors.
func (s *Server) Recovered(ctx context.Context, surface, method string, v any) error {
	s.log(ctx).Error("handler panic recovered", "surface", surface, "method", method, "panic", fmt.Sprint(v),
		"stack", string(debug.Stack()))
	if s.onPanic != nil {
		s.onPanic(surface, method)
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(MDOutcome, OutcomeUnknown))
	return status.Errorf(codes.Internal, "internal error in %s (the server logged it; the outcome is unknown)", method)
}

// RecoveryInterceptors make a panicking unary or streaming handler answer
// Internal instead of crashing the process (grpc-go does not recover
// handler panics).
func (s *Server) RecoveryInterceptors() []grpc.ServerOption {
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = s.Recovered(ss.Context(), "grpc", info.FullMethod, v)
			}
		}()
		return h(srv, ss)
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.recoveryUnary), grpc.ChainStreamInterceptor(stream)}
}

func (s *Server) recoveryUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, s.Recovered(ctx, "grpc", info.FullMethod, v)
		}
	}()
	return h(ctx, req)
}
