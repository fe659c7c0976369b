package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
)

// CreateToken creates a token with role (read, proxy or admin) and a label,
// and returns it with its secret, which the cluster shows only this once.
// Node tokens are bound to a node: CreateNodeToken.
func (c *Client) CreateToken(ctx context.Context, role, name string) (*coordpb.CreateTokenResponse, error) {
	return c.createToken(ctx, &coordpb.CreateTokenRequest{Role: role, Name: name})
}

// CreateNodeToken creates a node token bound to streaming node identity
// nodeID (docs/security.md#per-node-identity): the streaming node that
// presents it registers sessions bound to nodeID and may speak only for
// them.
func (c *Client) CreateNodeToken(ctx context.Context, nodeID uint64, name string) (*coordpb.CreateTokenResponse, error) {
	return c.createToken(ctx, &coordpb.CreateTokenRequest{Role: "node", Name: name, NodeId: nodeID})
}

func (c *Client) createToken(ctx context.Context, req *coordpb.CreateTokenRequest) (*coordpb.CreateTokenResponse, error) {
	var resp *coordpb.CreateTokenResponse
	// Never resent after an unknown outcome: a resend would create a
	// second token (the request has no request ID to dedup on).
	_, err := c.do(ctx, "CreateToken", mutationOnce, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewTokensClient(cc).CreateToken(ctx, req, opts...)
		return err
	})
	return resp, err
}

// ListTokens lists every token (IDs, labels, roles; never secrets).
func (c *Client) ListTokens(ctx context.Context) ([]*coordpb.TokenInfo, error) {
	var resp *coordpb.ListTokensResponse
	_, err := c.do(ctx, "ListTokens", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewTokensClient(cc).ListTokens(ctx, &coordpb.ListTokensRequest{}, opts...)
		return err
	})
	return resp.GetTokens(), err
}

// RevokeToken deletes token id.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	_, err := c.do(ctx, "RevokeToken("+id+")", mutation, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		_, err = coordpb.NewTokensClient(cc).RevokeToken(ctx, &coordpb.RevokeTokenRequest{Id: id}, opts...)
		return err
	})
	return err
}
