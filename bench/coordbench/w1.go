package main

import (
	"context"

	"github.com/coordd/coordd/api/coordpb"
)

// w1: the allocators. AllocTimestamp and AllocID with count 1 and 100, and
// Status, which does no coordination work on either system: the ceiling
// of the gRPC transport on this machine.
func w1() workloadDef {
	alloc := func(ts bool, count uint32) func(s *system, c, clients int) clientOp {
		return func(s *system, c, _ int) clientOp {
			ac := coordpb.NewAllocatorClient(s.conn(c))
			if ts {
				req := &coordpb.AllocTimestampRequest{Count: count}
				return func(ctx context.Context, _ int) error { _, err := ac.AllocTimestamp(ctx, req); return err }
			}
			req := &coordpb.AllocIDRequest{Count: count}
			return func(ctx context.Context, _ int) error { _, err := ac.AllocID(ctx, req); return err }
		}
	}
	return workloadDef{variants: []variant{
		{name: "status", newOp: func(s *system, c, _ int) clientOp {
			cc := coordpb.NewClusterClient(s.conn(c))
			return func(ctx context.Context, _ int) error { _, err := cc.Status(ctx, &coordpb.StatusRequest{}); return err }
		}},
		{name: "alloc-ts-1", values: 1, newOp: alloc(true, 1)},
		{name: "alloc-ts-100", values: 100, newOp: alloc(true, 100)},
		{name: "alloc-id-1", values: 1, newOp: alloc(false, 1)},
		{name: "alloc-id-100", values: 100, newOp: alloc(false, 100)},
	}}
}
