package grpcserver

import (
	"context"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Reads are served from this node's state: the newest applied one for a
// stale read, a linearizable one (on the leader, forwarded) otherwise.

// readState returns the state for a read at the requested consistency, or
// ok=false with resp/err already produced by forwarding.
func readState[Resp any](s *Server, ctx context.Context, c coordpb.ReadConsistency,
	call func(ctx context.Context, conn *grpc.ClientConn, o ...grpc.CallOption) (Resp, error)) (st *fsm.State, resp Resp, done bool, err error) {
	if err := checkConsistency(c); err != nil {
		return nil, resp, true, s.toStatus(ctx, err)
	}
	if c == coordpb.ReadConsistency_STALE {
		return s.node.State(), resp, false, nil
	}
	if resp, handled, err := forward(s, ctx, call); handled {
		return nil, resp, true, err
	}
	st, err = s.node.LinearizableRead(ctx)
	if err != nil {
		return nil, resp, true, s.toStatus(ctx, err)
	}
	return st, resp, false, nil
}

// checkConsistency refuses a consistency value outside the enum (a number
// an older or newer client may send): it is not silently read as either.
func checkConsistency(c coordpb.ReadConsistency) error {
	if _, ok := coordpb.ReadConsistency_name[int32(c)]; !ok {
		return vocab.Errorf(errInvalid, "consistency %d is not a known value (LINEARIZABLE or STALE)", c)
	}
	return nil
}
