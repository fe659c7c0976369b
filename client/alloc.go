package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// MaxAllocCount bounds the count of one allocation.
const MaxAllocCount = vocab.MaxAllocCount

// AllocTimestamp returns count consecutive hybrid timestamps first,
// first+1, ..., first+count-1 (physical ms << 18 | logical). Retrying is
// safe: a retried allocation only skips values.
func (c *Client) AllocTimestamp(ctx context.Context, count uint32) (first uint64, n uint32, err error) {
	if err := checkCount("AllocTimestamp", count); err != nil {
		return 0, 0, err
	}
	var resp *coordpb.AllocTimestampResponse
	_, err = c.do(ctx, fmt.Sprintf("AllocTimestamp(%d)", count), retrySafe, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewAllocatorClient(cc).AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: count}, opts...)
		return err
	})
	return resp.GetFirst(), resp.GetCount(), err
}

// AllocID returns count consecutive, never reused IDs first, first+1, ...,
// first+count-1. Retrying is safe: a retried allocation only skips values.
func (c *Client) AllocID(ctx context.Context, count uint32) (first uint64, n uint32, err error) {
	if err := checkCount("AllocID", count); err != nil {
		return 0, 0, err
	}
	var resp *coordpb.AllocIDResponse
	_, err = c.do(ctx, fmt.Sprintf("AllocID(%d)", count), retrySafe, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewAllocatorClient(cc).AllocID(ctx, &coordpb.AllocIDRequest{Count: count}, opts...)
		return err
	})
	return resp.GetFirst(), resp.GetCount(), err
}

func checkCount(op string, count uint32) error {
	if count == 0 || count > MaxAllocCount {
		return &Error{
			Op:  fmt.Sprintf("%s(%d)", op, count),
			Err: status.Errorf(codes.InvalidArgument, "count must be in 1..%d, got %d", MaxAllocCount, count),
		}
	}
	return nil
}
