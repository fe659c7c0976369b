package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
)

// At runs fn once against the member at grpcAddr only: no forwarding to
// the leader, no failover, no retry. For calls about one member (its
// status as it sees it, its log level, its recent errors). Bounded by the
// request timeout.
func (c *Client) At(ctx context.Context, grpcAddr string, fn func(ctx context.Context, cc *grpc.ClientConn) error) error {
	cc, err := c.conn(grpcAddr)
	if err != nil {
		return fmt.Errorf("member at %s: %w", grpcAddr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	if err := c.waitReady(ctx, grpcAddr, cc); err != nil {
		return fmt.Errorf("member at %s: %w", grpcAddr, err)
	}
	return fn(ctx, cc)
}

// SetLogLevelAt changes the log level of the member at grpcAddr.
func (c *Client) SetLogLevelAt(ctx context.Context, grpcAddr, level string) (*coordpb.LogLevelResponse, error) {
	var resp *coordpb.LogLevelResponse
	err := c.At(ctx, grpcAddr, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = coordpb.NewDiagnosticsClient(cc).SetLogLevel(ctx, &coordpb.SetLogLevelRequest{Level: level})
		return err
	})
	return resp, err
}

// GetLogLevelAt reads the log level of the member at grpcAddr.
func (c *Client) GetLogLevelAt(ctx context.Context, grpcAddr string) (*coordpb.LogLevelResponse, error) {
	var resp *coordpb.LogLevelResponse
	err := c.At(ctx, grpcAddr, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = coordpb.NewDiagnosticsClient(cc).GetLogLevel(ctx, &coordpb.GetLogLevelRequest{})
		return err
	})
	return resp, err
}

// RecentErrorsAt reads the recent error lines of the member at grpcAddr.
func (c *Client) RecentErrorsAt(ctx context.Context, grpcAddr string, limit uint32) (*coordpb.RecentErrorsResponse, error) {
	var resp *coordpb.RecentErrorsResponse
	err := c.At(ctx, grpcAddr, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = coordpb.NewDiagnosticsClient(cc).RecentErrors(ctx, &coordpb.RecentErrorsRequest{Limit: limit})
		return err
	})
	return resp, err
}

// StatusAt asks the member at grpcAddr for its own status.
func (c *Client) StatusAt(ctx context.Context, grpcAddr string) (*coordpb.StatusResponse, error) {
	var resp *coordpb.StatusResponse
	err := c.At(ctx, grpcAddr, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = coordpb.NewClusterClient(cc).Status(ctx, &coordpb.StatusRequest{})
		return err
	})
	return resp, err
}
