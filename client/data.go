package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// The write path (docs/semantics.md#segments).
// Calls made for a PChannel carry the caller's node ID and the PChannel term
// it holds; coordd refuses them unless that is the current assignment.

// AssignSegmentID asks for room for rows in growing segments; reply i
// answers request i. Assignments are not logged, so a retry only costs a
// second allocation that expires unused.
func (c *Client) AssignSegmentID(ctx context.Context, nodeID uint64, reqs []*coordpb.SegmentIDRequest) ([]*coordpb.SegmentIDAssignment, error) {
	if nodeID == 0 || len(reqs) == 0 {
		return nil, localError("AssignSegmentID", fmt.Errorf("need a node id and at least one request"))
	}
	req := &coordpb.AssignSegmentIDRequest{NodeId: nodeID, Requests: reqs}
	var resp *coordpb.AssignSegmentIDResponse
	_, err := c.do(ctx, "AssignSegmentID", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).AssignSegmentID(ctx, req, o...)
		return err
	})
	return resp.GetAssignments(), err
}

// ReportTimeTicks reports per-VChannel consumed time ticks (leader memory).
func (c *Client) ReportTimeTicks(ctx context.Context, nodeID uint64, ticks []*coordpb.ChannelTimeTick) (*coordpb.ReportTimeTicksResponse, error) {
	req := &coordpb.ReportTimeTicksRequest{NodeId: nodeID, Ticks: ticks}
	var resp *coordpb.ReportTimeTicksResponse
	_, err := c.do(ctx, "ReportTimeTicks", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).ReportTimeTicks(ctx, req, o...)
		return err
	})
	return resp, err
}

// SaveBinlogPaths records one segment's binlogs and positions. It is
// idempotent by construction (stale requests are acknowledged without a
// write) and also carries a request ID, so it is retried like a read.
func (c *Client) SaveBinlogPaths(ctx context.Context, req *coordpb.SaveBinlogPathsRequest) (*coordpb.SaveBinlogPathsResponse, error) {
	if req.GetSegmentId() <= 0 {
		return nil, localError("SaveBinlogPaths", fmt.Errorf("segment id must be positive"))
	}
	if req.RequestId == "" {
		req.RequestId = newRequestID()
	}
	var resp *coordpb.SaveBinlogPathsResponse
	_, err := c.do(ctx, "SaveBinlogPaths", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).SaveBinlogPaths(ctx, req, o...)
		return err
	})
	return resp, err
}

// UpdateChannelCheckpoints advances VChannel checkpoints as one batch.
// Checkpoints never move back, so a retry is harmless.
func (c *Client) UpdateChannelCheckpoints(ctx context.Context, nodeID uint64, cps []*coordpb.ChannelCheckpoint) (*coordpb.UpdateChannelCheckpointsResponse, error) {
	req := &coordpb.UpdateChannelCheckpointsRequest{NodeId: nodeID, Checkpoints: cps}
	var resp *coordpb.UpdateChannelCheckpointsResponse
	_, err := c.do(ctx, "UpdateChannelCheckpoints", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).UpdateChannelCheckpoints(ctx, req, o...)
		return err
	})
	return resp, err
}

// GetRecoveryInfo returns what a new owner needs to resume vchannel
// (linearizable).
func (c *Client) GetRecoveryInfo(ctx context.Context, vchannel string) (*coordpb.GetRecoveryInfoResponse, error) {
	req := &coordpb.GetRecoveryInfoRequest{Vchannel: vchannel}
	var resp *coordpb.GetRecoveryInfoResponse
	_, err := c.do(ctx, "GetRecoveryInfo", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).GetRecoveryInfo(ctx, req, o...)
		return err
	})
	return resp, err
}

// Flush seals every growing segment of a collection at a fresh flushTs.
// Sealing again what is sealed changes nothing, so a retry is safe.
func (c *Client) Flush(ctx context.Context, collectionID int64) (*coordpb.FlushResponse, error) {
	if collectionID <= 0 {
		return nil, localError("Flush", fmt.Errorf("collection id must be positive"))
	}
	var resp *coordpb.FlushResponse
	_, err := c.do(ctx, "Flush", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).Flush(ctx, &coordpb.FlushRequest{CollectionId: collectionID}, o...)
		return err
	})
	return resp, err
}

// FlushAll broadcasts FlushAll to every PChannel (waits for the broadcast).
// A repeat flushes what is growing by then: after an unknown outcome it is
// resent at most Config.OutcomeUnknownRetries times.
func (c *Client) FlushAll(ctx context.Context) (*coordpb.FlushAllResponse, error) {
	var resp *coordpb.FlushAllResponse
	_, err := c.do(ctx, "FlushAll", longMutation, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).FlushAll(ctx, &coordpb.FlushAllRequest{}, o...)
		return err
	})
	return resp, err
}

// GetFlushState reports whether everything a Flush returned is persisted,
// and if not, what is behind.
func (c *Client) GetFlushState(ctx context.Context, req *coordpb.GetFlushStateRequest) (*coordpb.GetFlushStateResponse, error) {
	var resp *coordpb.GetFlushStateResponse
	_, err := c.do(ctx, "GetFlushState", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).GetFlushState(ctx, req, o...)
		return err
	})
	return resp, err
}

// GetFlushAllState is GetFlushState for a FlushAll.
func (c *Client) GetFlushAllState(ctx context.Context, req *coordpb.GetFlushAllStateRequest) (*coordpb.GetFlushStateResponse, error) {
	var resp *coordpb.GetFlushStateResponse
	_, err := c.do(ctx, "GetFlushAllState", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).GetFlushAllState(ctx, req, o...)
		return err
	})
	return resp, err
}

// WaitFlushed polls GetFlushState every interval until it reports flushed
// (or ctx ends). progress, when set, sees every answer.
func (c *Client) WaitFlushed(ctx context.Context, f *coordpb.FlushResponse, interval time.Duration, progress func(*coordpb.GetFlushStateResponse)) (*coordpb.GetFlushStateResponse, error) {
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	ids := append(append([]int64(nil), f.GetSealedSegmentIds()...), f.GetFlushedSegmentIds()...)
	req := &coordpb.GetFlushStateRequest{SegmentIds: ids, FlushTs: f.GetFlushTs(), CollectionId: f.GetCollectionId()}
	for {
		st, err := c.GetFlushState(ctx, req)
		if err != nil {
			return nil, err
		}
		if progress != nil {
			progress(st)
		}
		if st.Flushed {
			return st, nil
		}
		if err := sleep(ctx, interval); err != nil {
			return st, err
		}
	}
}

// GetSegmentInfo returns the listed segments with binlogs and the
// checkpoints of their VChannels.
func (c *Client) GetSegmentInfo(ctx context.Context, ids []int64, includeUnhealthy bool) (*coordpb.GetSegmentInfoResponse, error) {
	if len(ids) == 0 {
		return nil, localError("GetSegmentInfo", fmt.Errorf("need at least one segment id"))
	}
	req := &coordpb.GetSegmentInfoRequest{SegmentIds: ids, IncludeUnhealthy: includeUnhealthy}
	var resp *coordpb.GetSegmentInfoResponse
	_, err := c.do(ctx, "GetSegmentInfo", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).GetSegmentInfo(ctx, req, o...)
		return err
	})
	return resp, err
}

// ListSegments lists segments (without binlogs), filtered by collection,
// VChannel and state when those are set.
func (c *Client) ListSegments(ctx context.Context, req *coordpb.ListSegmentsRequest) ([]*coordpb.SegmentInfo, error) {
	var resp *coordpb.ListSegmentsResponse
	_, err := c.do(ctx, "ListSegments", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).ListSegments(ctx, req, o...)
		return err
	})
	return resp.GetSegments(), err
}

// ListChannelCheckpoints lists VChannel checkpoints (collectionID 0: all).
func (c *Client) ListChannelCheckpoints(ctx context.Context, collectionID int64) ([]*coordpb.ChannelCheckpoint, error) {
	var resp *coordpb.ListChannelCheckpointsResponse
	_, err := c.do(ctx, "ListChannelCheckpoints", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewDataCoordClient(cc).ListChannelCheckpoints(ctx,
			&coordpb.ListChannelCheckpointsRequest{CollectionId: collectionID}, o...)
		return err
	})
	return resp.GetCheckpoints(), err
}

// WatchFlushTasks follows the flush tasks of one streaming node session
// across coordd members, calling fn with every complete task set received
// (possibly the same set again after a reconnect). It returns when ctx ends
// or fn returns an error.
func (c *Client) WatchFlushTasks(ctx context.Context, nodeID, epoch uint64, fn func([]*coordpb.FlushTask) error) error {
	if nodeID == 0 {
		return localError("WatchFlushTasks", fmt.Errorf("node id must be positive"))
	}
	for {
		for _, addr := range c.order() {
			if err := ctx.Err(); err != nil {
				return err
			}
			err := c.followFlushTasks(ctx, addr, nodeID, epoch, fn)
			var stop *stopError
			if errors.As(err, &stop) {
				return stop.err
			}
			if errors.Is(err, ErrClosed) || permanent(err) {
				return err
			}
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	}
}

// permanent: the server refused the watch itself (bad node or epoch); a
// reconnect would be refused again.
func permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound:
		return true
	}
	return false
}

type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

func (c *Client) followFlushTasks(ctx context.Context, addr string, nodeID, epoch uint64, fn func([]*coordpb.FlushTask) error) error {
	cc, err := c.conn(addr)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := coordpb.NewDataCoordClient(cc).WatchFlushTasks(sctx, &coordpb.WatchFlushTasksRequest{NodeId: nodeID, Epoch: epoch})
	if err != nil {
		return err
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return errors.New("flush task stream ended")
		}
		if err != nil {
			return err
		}
		if err := fn(m.GetTasks()); err != nil {
			return &stopError{err}
		}
	}
}
