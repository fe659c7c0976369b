package grpcserver

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/coordd/coordd/api/apitest"
	"github.com/coordd/coordd/api/coordpb"
)

// BenchmarkW1Handlers is the handler cost of coordbench's W1 variants
// (Status and the allocators), called in process on an established
// single-member leader with a leader lease (as a member started with
// --lease-reads, the default, serves them), 64 callers at once as in the
// bench. Its allocations per call are what the handler adds to gRPC's.
func BenchmarkW1Handlers(b *testing.B) {
	tn := startTestNodeKit(b, apitest.Config{LeaderLease: 150 * time.Millisecond}, nil)
	s := tn.srv
	cases := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"status", func(ctx context.Context) error { _, err := s.Status(ctx, &coordpb.StatusRequest{}); return err }},
		{"alloc-ts-1", func(ctx context.Context) error {
			_, err := s.AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: 1})
			return err
		}},
		{"alloc-ts-100", func(ctx context.Context) error {
			_, err := s.AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: 100})
			return err
		}},
		{"alloc-id-1", func(ctx context.Context) error {
			_, err := s.AllocID(ctx, &coordpb.AllocIDRequest{Count: 1})
			return err
		}},
		{"alloc-id-100", func(ctx context.Context) error {
			_, err := s.AllocID(ctx, &coordpb.AllocIDRequest{Count: 100})
			return err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					if err := c.call(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
