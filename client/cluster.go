package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
)

// MemberSpec names a member and its addresses. GRPCAddr and HTTPAddr may be
// empty.
type MemberSpec struct {
	ID       string
	RaftAddr string
	GRPCAddr string
	HTTPAddr string
}

// Status describes the cluster as the answering node sees it.
func (c *Client) Status(ctx context.Context) (*coordpb.StatusResponse, error) {
	var resp *coordpb.StatusResponse
	_, err := c.do(ctx, "Status", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewClusterClient(cc).Status(ctx, &coordpb.StatusRequest{}, opts...)
		return err
	})
	return resp, err
}

// Members lists the raft configuration. LINEARIZABLE is served through the
// leader; STALE by whichever node answers.
func (c *Client) Members(ctx context.Context, consistency coordpb.ReadConsistency) ([]*coordpb.Member, error) {
	var resp *coordpb.MembersResponse
	_, err := c.do(ctx, "Members", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewClusterClient(cc).Members(ctx, &coordpb.MembersRequest{Consistency: consistency}, opts...)
		return err
	})
	return resp.GetMembers(), err
}

// AddVoter adds (or re-adds) m as a voter and returns the new
// configuration.
func (c *Client) AddVoter(ctx context.Context, m MemberSpec) ([]*coordpb.Member, error) {
	req := &coordpb.AddVoterRequest{Id: m.ID, RaftAddr: m.RaftAddr, GrpcAddr: m.GRPCAddr, HttpAddr: m.HTTPAddr}
	var resp *coordpb.AddVoterResponse
	_, err := c.do(ctx, "AddVoter("+m.ID+")", mutation, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewClusterClient(cc).AddVoter(ctx, req, opts...)
		return err
	})
	return resp.GetMembers(), err
}

// RemoveMember removes member id and returns the new configuration.
func (c *Client) RemoveMember(ctx context.Context, id string) ([]*coordpb.Member, error) {
	var resp *coordpb.RemoveMemberResponse
	_, err := c.do(ctx, "RemoveMember("+id+")", mutation, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewClusterClient(cc).RemoveMember(ctx, &coordpb.RemoveMemberRequest{Id: id}, opts...)
		return err
	})
	return resp.GetMembers(), err
}

// TransferLeader hands leadership to targetID, or to the most up-to-date
// voter when targetID is empty. Without a target it is never retried after
// an unknown outcome: a second transfer would move leadership again.
func (c *Client) TransferLeader(ctx context.Context, targetID string) (*coordpb.TransferLeaderResponse, error) {
	kind, op := mutation, "TransferLeader("+targetID+")"
	if targetID == "" {
		kind, op = mutationOnce, "TransferLeader"
	}
	var resp *coordpb.TransferLeaderResponse
	_, err := c.do(ctx, op, kind, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewClusterClient(cc).TransferLeader(ctx, &coordpb.TransferLeaderRequest{TargetId: targetID}, opts...)
		return err
	})
	return resp, err
}

// RegisterMember records m's client-facing addresses. Repeating it is
// harmless, so it is retried like a read.
func (c *Client) RegisterMember(ctx context.Context, m MemberSpec) error {
	req := &coordpb.RegisterMemberRequest{Id: m.ID, RaftAddr: m.RaftAddr, GrpcAddr: m.GRPCAddr, HttpAddr: m.HTTPAddr}
	_, err := c.do(ctx, "RegisterMember("+m.ID+")", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		_, err := coordpb.NewClusterClient(cc).RegisterMember(ctx, req, opts...)
		return err
	})
	return err
}
