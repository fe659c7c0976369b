package grpcserver

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/logging"
)

// WithLogs gives the server the process's logging, which the Diagnostics
// service reads and changes. Without it those calls answer
// FailedPrecondition.
func WithLogs(l *logging.Logs) Option { return func(s *Server) { s.logs = l } }

func (s *Server) needLogs() error {
	if s.logs == nil {
		return status.Error(codes.FailedPrecondition, "this member was started without log control")
	}
	return nil
}

// GetLogLevel answers this member's log level.
func (s *Server) GetLogLevel(ctx context.Context, _ *coordpb.GetLogLevelRequest) (*coordpb.LogLevelResponse, error) {
	if err := s.needLogs(); err != nil {
		return nil, err
	}
	return &coordpb.LogLevelResponse{NodeId: s.self.ID, Level: s.logs.Level()}, nil
}

// SetLogLevel changes this member's log level; a bad name changes nothing.
func (s *Server) SetLogLevel(ctx context.Context, req *coordpb.SetLogLevelRequest) (*coordpb.LogLevelResponse, error) {
	if err := s.needLogs(); err != nil {
		return nil, err
	}
	prev, err := s.logs.SetLevel(req.Level)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	level := s.logs.Level()
	// Logged at WARN so the change shows at every level but error.
	s.log(ctx).Warn("log level changed", "from", prev, "to", level)
	return &coordpb.LogLevelResponse{NodeId: s.self.ID, Level: level, Previous: prev}, nil
}

// RecentErrors answers the error lines this member logged most recently.
func (s *Server) RecentErrors(ctx context.Context, req *coordpb.RecentErrorsRequest) (*coordpb.RecentErrorsResponse, error) {
	if err := s.needLogs(); err != nil {
		return nil, err
	}
	entries, dropped := s.logs.Recent(int(req.Limit))
	resp := &coordpb.RecentErrorsResponse{NodeId: s.self.ID, Dropped: dropped}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, &coordpb.LogEntry{Time: e.Time, Level: e.Level, Logger: e.Logger, Message: e.Message, Json: e.JSON})
	}
	return resp, nil
}

// log is the logger of the request ctx belongs to (its lines carry the
// request ID), or the server's own outside a request.
func (s *Server) log(ctx context.Context) hclog.Logger { return logging.FromContext(ctx, s.logger) }

// Logger is the request's logger (see WithRequestLogger), or the server's
// own outside a request.
func (s *Server) Logger(ctx context.Context) hclog.Logger { return s.log(ctx) }

// WithRequestLogger returns ctx carrying a logger that names the request
// (its request_id field, the caller's x-request-id, or a fresh ID), and
// the ID. The gRPC interceptors and the HTTP gateway call it first, so
// every line logged while serving the request carries its ID.
func (s *Server) WithRequestLogger(ctx context.Context, req any) (context.Context, string) {
	if id := logging.RequestID(ctx); id != "" {
		return ctx, id
	}
	id := RequestIDOf(ctx, req)
	if id == "" {
		id = NewRequestID()
	}
	return logging.WithRequest(ctx, s.logger, id), id
}
