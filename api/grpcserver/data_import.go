package grpcserver

import (
	"context"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/fsm"
)

// Import segments (docs/semantics.md#import-segments); the use case is
// datapath.Service's.

// CreateImportSegment creates an Importing segment for the caller.
func (s *Server) CreateImportSegment(ctx context.Context, req *coordpb.CreateImportSegmentRequest) (*coordpb.CreateImportSegmentResponse, error) {
	c, err := datapath.NewCreateImport(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.CreateImportSegmentResponse, error) {
		return coordpb.NewDataCoordClient(cc).CreateImportSegment(ctx, req, o...)
	}); handled {
		return resp, err
	}
	c.Caller, err = s.speaksFor(ctx, c.Node) // what the call proposes is stamped with the caller's node
	if err != nil {
		return nil, err
	}
	r, err := s.dataPath.CreateImportSegment(ctx, c)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.CreateImportSegmentResponse{SegmentId: r.SegmentID, ManifestBase: r.ManifestBase}, nil
}

// FinishImportSegment publishes an import's pointer and row count.
func (s *Server) FinishImportSegment(ctx context.Context, req *coordpb.FinishImportSegmentRequest) (*coordpb.FinishImportSegmentResponse, error) {
	c, err := datapath.NewFinishImport(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.FinishImportSegmentResponse, error) {
		return coordpb.NewDataCoordClient(cc).FinishImportSegment(ctx, req, o...)
	}); handled {
		return resp, err
	}
	c.Caller, err = s.speaksFor(ctx, c.Node)
	if err != nil {
		return nil, err
	}
	r, err := s.dataPath.FinishImportSegment(ctx, c)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.FinishImportSegmentResponse{Version: r.GetVersion(), State: fsm.SegmentStateName(r.GetState()), Unchanged: r.GetUnchanged()}, nil
}
