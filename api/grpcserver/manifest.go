package grpcserver

import (
	"context"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/manifest"
)

// Segment manifest commits (docs/semantics.md#manifests). Writes run on
// the leader (forwarded from followers): the committer takes the segment
// locks, writes the revisions and proposes one command; Apply decides.

// Manifests is the leader's manifest committer (tests and benchmarks).
func (s *Server) Manifests() *manifest.Committer { return s.manifests }

// CommitSegmentManifest commits one segment's mutation. The request is
// parsed once, here, before it is forwarded or committed.
func (s *Server) CommitSegmentManifest(ctx context.Context, req *coordpb.CommitSegmentManifestRequest) (*coordpb.CommitSegmentManifestResponse, error) {
	r, err := manifest.NewRequest(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.CommitSegmentManifestResponse, error) {
		return coordpb.NewManifestServiceClient(c).CommitSegmentManifest(ctx, req, o...)
	}); handled {
		return resp, err
	}
	resp, err := s.manifests.Commit(ctx, r)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return resp, nil
}

// CommitSegmentManifestBatch commits many segments in one command. The
// request is parsed once, here, before it is forwarded or committed.
func (s *Server) CommitSegmentManifestBatch(ctx context.Context, req *coordpb.CommitSegmentManifestBatchRequest) (*coordpb.CommitSegmentManifestBatchResponse, error) {
	b, err := manifest.NewBatch(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.CommitSegmentManifestBatchResponse, error) {
		return coordpb.NewManifestServiceClient(c).CommitSegmentManifestBatch(ctx, req, o...)
	}); handled {
		return resp, err
	}
	out, err := s.manifests.CommitBatch(ctx, b)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.CommitSegmentManifestBatchResponse{Results: out}, nil
}

// GetSegmentManifest returns a segment's pointer and decoded revision.
// Linearizable unless the request asks for a stale read.
func (s *Server) GetSegmentManifest(ctx context.Context, req *coordpb.GetSegmentManifestRequest) (*coordpb.GetSegmentManifestResponse, error) {
	if req.SegmentId <= 0 {
		return nil, s.toStatus(ctx, manifest.ErrInvalidSegment(req.SegmentId))
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetSegmentManifestResponse, error) {
		return coordpb.NewManifestServiceClient(c).GetSegmentManifest(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	out, err := s.manifests.Get(ctx, st, req.SegmentId)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return out, nil
}

// CollectManifestOrphans runs one orphan collection pass on the leader.
func (s *Server) CollectManifestOrphans(ctx context.Context, req *coordpb.CollectManifestOrphansRequest) (*coordpb.CollectManifestOrphansResponse, error) {
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.CollectManifestOrphansResponse, error) {
		return coordpb.NewManifestServiceClient(c).CollectManifestOrphans(ctx, req, o...)
	}); handled {
		return resp, err
	}
	rep, err := s.manifests.CollectOrphans(ctx, req.DryRun)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.CollectManifestOrphansResponse{Found: rep.Found, Removed: rep.Removed, Young: uint32(rep.Young)}, nil
}
