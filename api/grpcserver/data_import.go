package grpcserver

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// Import segments (docs/semantics.md#import-segments): an import or copy
// job on the VChannel's owner creates an Importing segment, writes its
// files and manifest revision, then publishes the pointer inline with one
// FinishImportSegment command; Apply runs the owner and version checks.

var importLevels = map[string]logpb.SegmentLevel{"": logpb.SegmentLevel_LEVEL_L1,
	"L1": logpb.SegmentLevel_LEVEL_L1, "L2": logpb.SegmentLevel_LEVEL_L2}

// CreateImportSegment creates an Importing segment for the caller.
func (s *Server) CreateImportSegment(ctx context.Context, req *coordpb.CreateImportSegmentRequest) (*coordpb.CreateImportSegmentResponse, error) {
	level, ok := importLevels[req.Level]
	if !ok {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: an import segment's level is L1 or L2, got %q", errInvalid, req.Level))
	}
	c, err := commands.New(&logpb.CreateImportSegment{CollectionId: req.CollectionId, PartitionId: req.PartitionId,
		Vchannel: req.Vchannel, NodeId: req.NodeId, PchannelTerm: req.PchannelTerm, Level: level}, req.RequestId)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.CreateImportSegmentResponse, error) {
		return coordpb.NewDataCoordClient(cc).CreateImportSegment(ctx, req, o...)
	}); handled {
		return resp, err
	}
	sctx, err := s.speaksFor(ctx, s.node.State(), req.NodeId)
	if err != nil {
		return nil, err
	}
	ctx = sctx // what the call proposes is stamped with the caller's node
	res, err := s.commit(ctx, c)
	if err != nil {
		return nil, err
	}
	ids := res.GetSegments().GetIds()
	if len(ids) != 1 {
		return nil, s.toStatus(ctx, fmt.Errorf("create import segment: the command answered %d segment ids", len(ids)))
	}
	return &coordpb.CreateImportSegmentResponse{SegmentId: ids[0],
		ManifestBase: commands.ManifestBase(req.CollectionId, req.PartitionId, ids[0])}, nil
}

// FinishImportSegment publishes an import's pointer and row count.
func (s *Server) FinishImportSegment(ctx context.Context, req *coordpb.FinishImportSegmentRequest) (*coordpb.FinishImportSegmentResponse, error) {
	c, err := commands.New(&logpb.FinishImportSegment{SegmentId: req.SegmentId, CollectionId: req.CollectionId,
		Vchannel: req.Vchannel, NodeId: req.NodeId, PchannelTerm: req.PchannelTerm,
		ManifestPath: req.ManifestPath, NumOfRows: req.NumOfRows}, req.RequestId)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.FinishImportSegmentResponse, error) {
		return coordpb.NewDataCoordClient(cc).FinishImportSegment(ctx, req, o...)
	}); handled {
		return resp, err
	}
	sctx, err := s.speaksFor(ctx, s.node.State(), req.NodeId)
	if err != nil {
		return nil, err
	}
	ctx = sctx // what the call proposes is stamped with the caller's node
	if err := s.manifests.CheckNamedRevision(ctx, s.node.State(), req.SegmentId, req.ManifestPath); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	res, err := s.commit(ctx, c)
	if err != nil {
		return nil, err
	}
	r := res.GetImportFinished()
	return &coordpb.FinishImportSegmentResponse{Version: r.GetVersion(), State: fsm.SegmentStateName(r.GetState()), Unchanged: r.GetUnchanged()}, nil
}
