package main

import (
	"context"

	"github.com/coordd/coordd/api/coordpb"
)

// w1: the allocators. AllocTimestamp and AllocID with count 1 and 100, and
// two reference RPCs: GetLogLevel ("noop": a constant answered from the
// member's memory on both systems, the ceiling of the gRPC transport on
// this machine) and Status (on coordd it also reads raft's configuration
// through raft's main loop; on the peer it is a constant).
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
		{name: "noop", newOp: func(s *system, c, _ int) clientOp {
			dc := coordpb.NewDiagnosticsClient(s.conn(c))
			return func(ctx context.Context, _ int) error {
				_, err := dc.GetLogLevel(ctx, &coordpb.GetLogLevelRequest{})
				return err
			}
		}},
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
