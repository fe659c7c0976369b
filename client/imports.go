package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
)

// Import segments (docs/semantics.md#import-segments): an import or copy
// job on a VChannel's owner creates an Importing segment, writes its files
// and its manifest revision under the answered base, then finishes it with
// the pointer.

// CreateImportSegment creates an Importing segment. The request carries a
// request ID (one is made when empty), so a retry answers the first
// segment instead of creating a second.
func (c *Client) CreateImportSegment(ctx context.Context, req *coordpb.CreateImportSegmentRequest) (*coordpb.CreateImportSegmentResponse, error) {
	if req.GetNodeId() == 0 || req.GetCollectionId() <= 0 {
		return nil, localError("CreateImportSegment", fmt.Errorf("node id and collection id are required"))
	}
	if req.RequestId == "" {
		req.RequestId = newRequestID()
	}
	var resp *coordpb.CreateImportSegmentResponse
	_, err := c.do(ctx, "CreateImportSegment", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).CreateImportSegment(ctx, req, o...)
		return err
	})
	return resp, err
}

// FinishImportSegment publishes an import's manifest pointer and row count
// and makes the segment Flushed. Publishing the same pointer again is an
// acknowledged no-op (Unchanged), so it is retried like a read.
func (c *Client) FinishImportSegment(ctx context.Context, req *coordpb.FinishImportSegmentRequest) (*coordpb.FinishImportSegmentResponse, error) {
	if req.GetSegmentId() <= 0 || req.GetManifestPath() == "" {
		return nil, localError("FinishImportSegment", fmt.Errorf("segment id and manifest pointer are required"))
	}
	if req.RequestId == "" {
		req.RequestId = newRequestID()
	}
	var resp *coordpb.FinishImportSegmentResponse
	_, err := c.do(ctx, "FinishImportSegment", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).FinishImportSegment(ctx, req, o...)
		return err
	})
	return resp, err
}
