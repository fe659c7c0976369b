package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// ListPChannels lists every PChannel with its assignment.
func (c *Client) ListPChannels(ctx context.Context, consistency coordpb.ReadConsistency) (*coordpb.ListPChannelsResponse, error) {
	var resp *coordpb.ListPChannelsResponse
	_, err := c.do(ctx, "ListPChannels", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).ListPChannels(ctx, &coordpb.ListPChannelsRequest{Consistency: consistency}, o...)
		return err
	})
	return resp, err
}

// AddPChannels creates PChannels (idempotent) and returns how many were new.
func (c *Client) AddPChannels(ctx context.Context, names []string) (uint32, error) {
	for _, n := range names {
		if err := vocab.ValidatePChannelName(n); err != nil {
			return 0, localError("AddPChannels", err)
		}
	}
	var resp *coordpb.AddPChannelsResponse
	_, err := c.do(ctx, "AddPChannels", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).AddPChannels(ctx, &coordpb.AddPChannelsRequest{Names: names}, o...)
		return err
	})
	return resp.GetAdded(), err
}

// Rebalance asks the leader's balancer for a round now.
func (c *Client) Rebalance(ctx context.Context) error {
	_, err := c.RebalanceReport(ctx)
	return err
}

// RebalanceReport asks the leader's balancer for a round now and returns
// what it moved, or why nothing moved and when a blocked move becomes
// possible.
func (c *Client) RebalanceReport(ctx context.Context) (*coordpb.RebalanceResponse, error) {
	var resp *coordpb.RebalanceResponse
	_, err := c.do(ctx, "Rebalance", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).Rebalance(ctx, &coordpb.RebalanceRequest{}, o...)
		return err
	})
	return resp, err
}

// ListNodes lists streaming nodes (DOWN ones too with includeDown).
func (c *Client) ListNodes(ctx context.Context, consistency coordpb.ReadConsistency, includeDown bool) ([]*coordpb.StreamingNode, error) {
	var resp *coordpb.ListNodesResponse
	_, err := c.do(ctx, "ListNodes", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).ListNodes(ctx, &coordpb.ListNodesRequest{Consistency: consistency, IncludeDown: includeDown}, o...)
		return err
	})
	return resp.GetNodes(), err
}

// DrainNode starts (drain=true) or stops draining a streaming node.
func (c *Client) DrainNode(ctx context.Context, nodeID uint64, drain bool, reason string) (*coordpb.StreamingNode, error) {
	if nodeID == 0 {
		return nil, localError("DrainNode", fmt.Errorf("node id must be positive"))
	}
	req := &coordpb.DrainNodeRequest{NodeId: nodeID, Reason: reason}
	var resp *coordpb.DrainNodeResponse
	_, err := c.do(ctx, "DrainNode", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		if drain {
			resp, err = coordpb.NewChannelsClient(cc).DrainNode(ctx, req, o...)
		} else {
			resp, err = coordpb.NewChannelsClient(cc).UndrainNode(ctx, req, o...)
		}
		return err
	})
	return resp.GetNode(), err
}

// AllocVirtualChannels allocates count VChannels for a collection. The
// request ID makes retries (here and by the caller) return the first result.
func (c *Client) AllocVirtualChannels(ctx context.Context, collectionID int64, count uint32, requestID string) ([]string, error) {
	if requestID == "" {
		requestID = newRequestID()
	}
	if err := vocab.ValidateRequestID(requestID); err != nil {
		return nil, localError("AllocVirtualChannels", err)
	}
	if err := vocab.ValidateVChannelAlloc(collectionID, count); err != nil {
		return nil, localError("AllocVirtualChannels", err)
	}
	req := &coordpb.AllocVirtualChannelsRequest{CollectionId: collectionID, Count: count, RequestId: requestID}
	var resp *coordpb.AllocVirtualChannelsResponse
	_, err := c.do(ctx, "AllocVirtualChannels", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).AllocVirtualChannels(ctx, req, o...)
		return err
	})
	return resp.GetVchannels(), err
}

// DropVirtualChannels forgets a collection's VChannels.
func (c *Client) DropVirtualChannels(ctx context.Context, collectionID int64, requestID string) error {
	if requestID == "" {
		requestID = newRequestID()
	}
	if err := vocab.ValidateRequestID(requestID); err != nil {
		return localError("DropVirtualChannels", err)
	}
	if err := vocab.ValidateCollectionID(collectionID); err != nil {
		return localError("DropVirtualChannels", err)
	}
	req := &coordpb.DropVirtualChannelsRequest{CollectionId: collectionID, RequestId: requestID}
	_, err := c.do(ctx, "DropVirtualChannels", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) error {
		_, err := coordpb.NewChannelsClient(cc).DropVirtualChannels(ctx, req, o...)
		return err
	})
	return err
}

// ListVirtualChannels lists collections' VChannels (collectionID 0: all).
func (c *Client) ListVirtualChannels(ctx context.Context, consistency coordpb.ReadConsistency, collectionID int64) ([]*coordpb.CollectionVChannels, error) {
	var resp *coordpb.ListVirtualChannelsResponse
	_, err := c.do(ctx, "ListVirtualChannels", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).ListVirtualChannels(ctx, &coordpb.ListVirtualChannelsRequest{Consistency: consistency, CollectionId: collectionID}, o...)
		return err
	})
	return resp.GetCollections(), err
}

// GetReplicateConfiguration returns the replication configuration with this
// cluster's ID and role (PRIMARY or SECONDARY), read through the leader.
func (c *Client) GetReplicateConfiguration(ctx context.Context) (*coordpb.GetReplicateConfigurationResponse, error) {
	var resp *coordpb.GetReplicateConfigurationResponse
	_, err := c.do(ctx, "GetReplicateConfiguration", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).GetReplicateConfiguration(ctx, &coordpb.GetReplicateConfigurationRequest{}, o...)
		return err
	})
	return resp, err
}

// UpdateReplicateConfiguration replaces the replication configuration.
// Writing the same configuration again changes nothing, so it is retried
// like a read.
func (c *Client) UpdateReplicateConfiguration(ctx context.Context, cfg *coordpb.ReplicateConfiguration) error {
	req := &coordpb.UpdateReplicateConfigurationRequest{Config: cfg}
	_, err := c.do(ctx, "UpdateReplicateConfiguration", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) error {
		_, err := coordpb.NewChannelsClient(cc).UpdateReplicateConfiguration(ctx, req, o...)
		return err
	})
	return err
}

// ResetReplicateRole makes a secondary cluster a primary again (an
// operator's decision; reason is logged by the leader) and returns the
// configuration installed. Resetting twice is refused the second time
// (the cluster is a primary then), so it is not retried after an unknown
// outcome.
func (c *Client) ResetReplicateRole(ctx context.Context, reason string) (*coordpb.GetReplicateConfigurationResponse, error) {
	var resp *coordpb.GetReplicateConfigurationResponse
	_, err := c.do(ctx, "ResetReplicateRole", mutationOnce, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).ResetReplicateRole(ctx, &coordpb.ResetReplicateRoleRequest{Reason: reason}, o...)
		return err
	})
	return resp, err
}

// ReportAssignmentError reports pchannel's WAL broken at term.
func (c *Client) ReportAssignmentError(ctx context.Context, pchannel string, term int64, msg string) (bool, error) {
	var resp *coordpb.ReportAssignmentErrorResponse
	_, err := c.do(ctx, "ReportAssignmentError", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewChannelsClient(cc).ReportAssignmentError(ctx, &coordpb.ReportAssignmentErrorRequest{Pchannel: pchannel, Term: term, Error: msg}, o...)
		return err
	})
	return resp.GetMarked(), err
}

// localError is a bad argument caught before any call.
func localError(op string, err error) error {
	return &Error{Op: op, Err: status.Error(codes.InvalidArgument, err.Error())}
}

// newRequestID returns a random request ID for retry deduplication.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
