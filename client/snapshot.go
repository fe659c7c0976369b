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

// SnapshotInfo describes a snapshot written by Snapshot.
type SnapshotInfo struct {
	LeaderID string // the leader that produced it
	Endpoint string // the leader's gRPC address
	Bytes    int64  // bytes written
}

var errStalled = errors.New("snapshot stream stalled")

// Snapshot streams a consistent snapshot of the state machine from the
// leader into w. It asks any endpoint for the leader's gRPC address (Status)
// and then streams from the leader. RequestTimeout bounds finding the
// leader and the wait for each chunk; only ctx bounds the whole transfer.
// A failure before the first byte reached w is retried; after that the
// error is returned, since w cannot be rewound.
func (c *Client) Snapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	var info SnapshotInfo
	delay := backoffStart
	for attempts := 1; ; attempts++ {
		st, err := c.findLeader(ctx)
		if err != nil {
			return info, err
		}
		info.LeaderID, info.Endpoint = st.GetLeaderId(), st.GetLeaderGrpcAddr()
		n, err := c.streamSnapshot(ctx, info.Endpoint, w)
		info.Bytes = n
		if err == nil {
			c.setPreferred(info.Endpoint)
			return info, nil
		}
		e := &Error{Op: "Snapshot", Endpoint: info.Endpoint, Attempts: attempts, LeaderID: info.LeaderID, Err: err}
		if ctx.Err() != nil {
			e.Stopped = ctx.Err()
			return info, e
		}
		if retry, _ := classify(err, nil, false); !retry || n > 0 {
			return info, e
		}
		if attempts > c.cfg.MaxRetries {
			e.Stopped = errRetryBudget
			return info, e
		}
		if err := sleep(ctx, delay); err != nil {
			e.Stopped = err
			return info, e
		}
		delay = min(2*delay, backoffCap)
	}
}

// findLeader asks any endpoint for the status and retries until it names
// the leader's gRPC address.
func (c *Client) findLeader(ctx context.Context) (*coordpb.StatusResponse, error) {
	var st *coordpb.StatusResponse
	_, err := c.do(ctx, "Snapshot: find leader", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		resp, err := coordpb.NewClusterClient(cc).Status(ctx, &coordpb.StatusRequest{}, opts...)
		if err != nil {
			return err
		}
		if resp.GetLeaderGrpcAddr() == "" {
			return status.Errorf(codes.Unavailable, "node %s knows no leader's gRPC address", resp.GetNodeId())
		}
		st = resp
		return nil
	})
	return st, err
}

// streamSnapshot copies one Snapshot stream from addr into w and returns
// the bytes written.
func (c *Client) streamSnapshot(ctx context.Context, addr string, w io.Writer) (int64, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return 0, err
	}
	if err := c.waitReady(ctx, addr, cc); err != nil {
		return 0, err
	}
	idle := c.cfg.RequestTimeout
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(idle, func() { cancel(errStalled) })
	defer timer.Stop()

	stalled := func(err error) error {
		if errors.Is(context.Cause(ctx), errStalled) {
			return status.Errorf(codes.DeadlineExceeded, "no snapshot data from %s for %v", addr, idle)
		}
		return err
	}
	stream, err := coordpb.NewClusterClient(cc).Snapshot(ctx, &coordpb.SnapshotRequest{})
	if err != nil {
		return 0, stalled(err)
	}
	var n int64
	for {
		chunk, err := stream.Recv()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, stalled(err)
		}
		timer.Reset(idle)
		m, err := w.Write(chunk.GetData())
		n += int64(m)
		if err != nil {
			return n, fmt.Errorf("write snapshot: %w", err)
		}
	}
}
