package grpcserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/logging"
)

// Defaults of the server's own bounds (cmd/coordd exposes each as a flag).
const (
	DefaultMaxWatchers = 1000
	DefaultMaxWait     = 2 * time.Minute
)

// MDRequestID is the metadata key (and, on HTTP, the X-Request-Id header)
// that names a request in the logs.
const MDRequestID = "x-request-id"

// WithMaxWatchers bounds the assignment watch streams open on this member;
// past it WatchAssignments answers ResourceExhausted (default
// DefaultMaxWatchers; n <= 0 keeps the default).
func WithMaxWatchers(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxWatchers = int64(n)
		}
	}
}

// WithMaxWait bounds how long any unary call may wait on this member,
// whatever deadline (or none) its caller gave (default DefaultMaxWait).
func WithMaxWait(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.maxWait = d
		}
	}
}

// Limits are the server's bounds and how often each refused or cut a call.
type Limits struct {
	MaxWatchers      int64
	MaxWait          time.Duration
	WatchersRefused  uint64 // WatchAssignments answered ResourceExhausted
	InternalFailures uint64 // calls that failed with Internal (each logged)
}

// Limits reports the bounds and their counters (for metrics).
func (s *Server) Limits() Limits {
	return Limits{MaxWatchers: s.maxWatchers, MaxWait: s.maxWait,
		WatchersRefused: s.watchersRefused.Load(), InternalFailures: s.internalFailures.Load()}
}

type limitCounters struct {
	watchersRefused  atomic.Uint64
	internalFailures atomic.Uint64
}

// admitWatcher counts a new watch stream, or refuses it past the cap.
func (s *Server) admitWatcher() error {
	if n := s.watchers.Add(1); n > s.maxWatchers {
		s.watchers.Add(-1)
		s.watchersRefused.Add(1)
		return status.Errorf(codes.ResourceExhausted,
			"%d assignment watch streams are open on member %s (max %d): retry later or watch through another member",
			n-1, s.self.ID, s.maxWatchers)
	}
	return nil
}

// UnaryInterceptor bounds every unary call by the server's maximum wait,
// gives it a request-scoped logger (every line names its request ID), logs
// each call at debug and each that fails with Internal at error. What a
// plain gRPC server does not pay for is paid only when used: the deadline's
// timer when the handler waits (boundWait), the request ID and logger when
// something logs (withLazyRequestLogger), the debug line's fields at debug.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, bound := boundWait(ctx, s.maxWait)
		defer bound.release()
		ctx = s.withLazyRequestLogger(ctx, req)
		debug := s.logger.IsDebug()
		var start time.Time
		if debug {
			start = time.Now()
		}
		resp, err := handler(ctx, req)
		if debug {
			s.log(ctx).Debug("grpc call", "method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start))
		}
		s.LogFailure(ctx, info.FullMethod, req, err)
		return resp, err
	}
}

// withLazyRequestLogger is WithRequestLogger with the ID found (or made)
// and the logger built only when the call first logs or asks for its ID.
func (s *Server) withLazyRequestLogger(ctx context.Context, req any) context.Context {
	if logging.HasRequest(ctx) {
		return ctx
	}
	in := ctx
	return logging.WithLazyRequest(ctx, s.logger, func() string {
		if id := RequestIDOf(in, req); id != "" {
			return id
		}
		return NewRequestID()
	})
}

// StreamInterceptor gives each stream a request-scoped logger and logs
// each that fails with Internal. Streams (assignment watches) are
// long-lived by design and get no deadline.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := s.withLazyRequestLogger(ss.Context(), nil)
		if s.logger.IsDebug() {
			s.log(ctx).Debug("grpc stream opened", "method", info.FullMethod)
		}
		err := handler(srv, &scopedStream{ServerStream: ss, ctx: ctx})
		s.LogFailure(ctx, info.FullMethod, nil, err)
		return err
	}
}

// scopedStream is a stream whose context carries the request's logger.
type scopedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *scopedStream) Context() context.Context { return s.ctx }

// LogFailure logs err when it maps to Internal: an unexpected error is
// never answered without a trace. The request ID is the one the request's
// logger carries (see WithRequestLogger), else the request's own
// request_id field or the caller's x-request-id metadata, else a fresh one.
// An ID the caller did not send is sent back as x-request-id header
// metadata on gRPC.
func (s *Server) LogFailure(ctx context.Context, method string, req any, err error) {
	if err == nil || status.Code(err) != codes.Internal {
		return
	}
	s.internalFailures.Add(1)
	ctx, id := s.WithRequestLogger(ctx, req)
	if RequestIDOf(ctx, req) != id {
		_ = grpc.SetHeader(ctx, metadata.Pairs(MDRequestID, id))
	}
	s.log(ctx).Error("request failed with an internal error", "method", method, "error", err)
}

// RequestIDOf returns the ID that names req in the logs: its request_id
// field, or the x-request-id metadata of ctx, or "".
func RequestIDOf(ctx context.Context, req any) string {
	if r, ok := req.(interface{ GetRequestId() string }); ok && r.GetRequestId() != "" {
		return r.GetRequestId()
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MDRequestID); len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return ""
}

// NewRequestID makes a random request ID.
func NewRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("req-%s", hex.EncodeToString(b[:]))
}
