package grpcserver

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

func validateCount(count uint32) error {
	if count == 0 || count > vocab.MaxAllocCount {
		return vocab.Errorf(errInvalid, "count must be in 1..%d, got %d", vocab.MaxAllocCount, count)
	}
	return nil
}

// AllocTimestamp returns the first of count consecutive hybrid timestamps
// (docs/semantics.md#allocators). Served by the leader (forwarded from a
// follower); every answer is above anything handed out before the call began,
// across leader changes. InvalidArgument for a count outside 1..MaxAllocCount;
// Unavailable when no established leader can answer.
func (s *Server) AllocTimestamp(ctx context.Context, req *coordpb.AllocTimestampRequest) (*coordpb.AllocTimestampResponse, error) {
	if err := validateCount(req.Count); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AllocTimestampResponse, error) {
		return coordpb.NewAllocatorClient(c).AllocTimestamp(ctx, req, o...)
	}); handled {
		return resp, err
	}
	first, err := s.tso.Alloc(ctx, req.Count)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.AllocTimestampResponse{First: first, Count: req.Count}, nil
}

// AllocID returns the first of count consecutive global IDs, never handed out
// before (docs/semantics.md#allocators). Served by the leader; InvalidArgument
// for a count outside 1..MaxAllocCount; Unavailable when no established leader
// can answer. A retried call may skip IDs, never repeat them.
func (s *Server) AllocID(ctx context.Context, req *coordpb.AllocIDRequest) (*coordpb.AllocIDResponse, error) {
	if err := validateCount(req.Count); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AllocIDResponse, error) {
		return coordpb.NewAllocatorClient(c).AllocID(ctx, req, o...)
	}); handled {
		return resp, err
	}
	first, err := s.ids.Alloc(ctx, req.Count)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.AllocIDResponse{First: first, Count: req.Count}, nil
}

// TSOSkew is how far the timestamp oracle runs ahead of the clock, and
// false when this member serves no timestamps.
func (s *Server) TSOSkew() (time.Duration, bool) { return s.tso.Skew() }
