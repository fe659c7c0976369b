package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// Segment manifest commits (docs/semantics.md#manifests).

// CommitSegmentManifest commits one segment's mutation. A request ID is
// added when the request has none, so a retry after an unknown outcome
// answers with the first attempt's result instead of committing twice:
// the call is retried like a read.
// Refusals: ManifestStale (retry after re-reading), codes.NotFound
// (discard), codes.InvalidArgument.
func (c *Client) CommitSegmentManifest(ctx context.Context, req *coordpb.CommitSegmentManifestRequest) (*coordpb.CommitSegmentManifestResponse, error) {
	if req.GetSegmentId() <= 0 {
		return nil, localError("CommitSegmentManifest", fmt.Errorf("segment id must be positive"))
	}
	if req.RequestId == "" {
		req.RequestId = newRequestID()
	}
	var resp *coordpb.CommitSegmentManifestResponse
	_, err := c.do(ctx, fmt.Sprintf("CommitSegmentManifest(%d)", req.SegmentId), retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewManifestServiceClient(cc).CommitSegmentManifest(ctx, req, o...)
		return err
	})
	return resp, err
}

// CommitSegmentManifestBatch commits many segments in one command (all or
// nothing; Dropped members come back skipped). Its request ID makes a
// retry answer with the first attempt's result, as for a single commit.
func (c *Client) CommitSegmentManifestBatch(ctx context.Context, commits []*coordpb.CommitSegmentManifestRequest) ([]*coordpb.CommitSegmentManifestResponse, error) {
	req := &coordpb.CommitSegmentManifestBatchRequest{Commits: commits, RequestId: newRequestID()}
	var resp *coordpb.CommitSegmentManifestBatchResponse
	_, err := c.do(ctx, fmt.Sprintf("CommitSegmentManifestBatch(%d)", len(commits)), retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewManifestServiceClient(cc).CommitSegmentManifestBatch(ctx, req, o...)
		return err
	})
	return resp.GetResults(), err
}

// GetSegmentManifest returns a segment's pointer and decoded revision
// (linearizable).
func (c *Client) GetSegmentManifest(ctx context.Context, segmentID int64) (*coordpb.GetSegmentManifestResponse, error) {
	req := &coordpb.GetSegmentManifestRequest{SegmentId: segmentID}
	var resp *coordpb.GetSegmentManifestResponse
	_, err := c.do(ctx, fmt.Sprintf("GetSegmentManifest(%d)", segmentID), retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewManifestServiceClient(cc).GetSegmentManifest(ctx, req, o...)
		return err
	})
	return resp, err
}

// CollectManifestOrphans runs one orphan collection pass on the leader.
func (c *Client) CollectManifestOrphans(ctx context.Context, dryRun bool) (*coordpb.CollectManifestOrphansResponse, error) {
	req := &coordpb.CollectManifestOrphansRequest{DryRun: dryRun}
	var resp *coordpb.CollectManifestOrphansResponse
	_, err := c.do(ctx, "CollectManifestOrphans", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewManifestServiceClient(cc).CollectManifestOrphans(ctx, req, o...)
		return err
	})
	return resp, err
}

// ManifestStale describes a stale manifest refusal: the commit was built
// on version Expected, the segment is at Current.
type ManifestStale struct {
	SegmentID, Expected, Current int64
}

// AsManifestStale recognises a stale refusal (codes.Aborted with the
// stale-manifest message) and recovers its versions. A refusal because a
// newer leader established itself is stale too, with both versions -1.
func AsManifestStale(err error) (ManifestStale, bool) {
	st, ok := status.FromError(err)
	if !ok {
		var ce *Error
		if !errors.As(err, &ce) {
			return ManifestStale{}, false
		}
		st = ce.GRPCStatus()
	}
	if st.Code() != codes.Aborted {
		return ManifestStale{}, false
	}
	if seg, exp, cur, ok := vocab.ParseStaleManifest(st.Message()); ok {
		return ManifestStale{SegmentID: seg, Expected: exp, Current: cur}, true
	}
	return ManifestStale{Expected: -1, Current: -1}, true
}
