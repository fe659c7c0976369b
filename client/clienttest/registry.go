package clienttest

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// The fake's StreamingNodeRegistry: registration, heartbeats, drain and
// deregistration against the shared channel state.

// RegisterStreamingNode implements coordpb.StreamingNodeRegistryServer: a
// new UP node (the same incarnation at the same address gets its node back).
func (n *Node) RegisterStreamingNode(_ context.Context, req *coordpb.RegisterStreamingNodeRequest) (*coordpb.RegisterStreamingNodeResponse, error) {
	if err := vocab.ValidateAddr("address", req.Address, true); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if req.Incarnation == "" {
		return nil, status.Error(codes.InvalidArgument, "incarnation is required")
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.ch.state.Nodes {
		if nd.Address == req.Address && nd.State != "DOWN" && nd.Reason == "incarnation "+req.Incarnation {
			return &coordpb.RegisterStreamingNodeResponse{NodeId: nd.Id, Epoch: nd.Epoch,
				RegisteredVersion: proto.Clone(c.ch.state.Version).(*coordpb.Version)}, nil
		}
	}
	c.ch.nextNodeID++
	nd := &coordpb.StreamingNode{Id: c.ch.nextNodeID, Address: req.Address, ResourceGroup: req.ResourceGroup,
		State: "UP", Epoch: 1, Reason: "incarnation " + req.Incarnation, LastHeartbeatMsAgo: -1}
	c.ch.state.Nodes = append(c.ch.state.Nodes, nd)
	c.bumpLocked()
	return &coordpb.RegisterStreamingNodeResponse{NodeId: nd.Id, Epoch: nd.Epoch,
		RegisteredVersion: proto.Clone(c.ch.state.Version).(*coordpb.Version)}, nil
}

// sessionLocked returns the live node (node, epoch).
func (c *Cluster) sessionLocked(node, epoch uint64) (*coordpb.StreamingNode, error) {
	nd := c.nodeLocked(node)
	if nd == nil || nd.State == "DOWN" || nd.Epoch != epoch {
		return nil, status.Errorf(codes.NotFound, "streaming node %d epoch %d is not registered; register again", node, epoch)
	}
	return nd, nil
}

// Heartbeat implements coordpb.StreamingNodeRegistryServer.
func (n *Node) Heartbeat(_ context.Context, req *coordpb.HeartbeatRequest) (*coordpb.HeartbeatResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	nd, err := c.sessionLocked(req.NodeId, req.Epoch)
	if err != nil {
		return nil, err
	}
	nd.LastHeartbeatMsAgo = 0
	return &coordpb.HeartbeatResponse{CoordTerm: c.term, State: nd.State, TtlMs: 10_000}, nil
}

// RequestDrain implements coordpb.StreamingNodeRegistryServer.
func (n *Node) RequestDrain(_ context.Context, req *coordpb.NodeSessionRequest) (*coordpb.NodeSessionResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	nd, err := c.sessionLocked(req.NodeId, req.Epoch)
	if err != nil {
		return nil, err
	}
	if nd.State != "DRAINING" {
		nd.State, nd.Reason = "DRAINING", "controlled shutdown"
		c.bumpLocked()
	}
	return &coordpb.NodeSessionResponse{State: nd.State, Pchannels: c.heldLocked()[nd.Id]}, nil
}

// Deregister implements coordpb.StreamingNodeRegistryServer.
func (n *Node) Deregister(_ context.Context, req *coordpb.NodeSessionRequest) (*coordpb.NodeSessionResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	nd, err := c.sessionLocked(req.NodeId, req.Epoch)
	if err != nil {
		return &coordpb.NodeSessionResponse{State: "DOWN"}, nil
	}
	nd.State, nd.Reason = "DOWN", "deregistered"
	c.bumpLocked()
	return &coordpb.NodeSessionResponse{State: nd.State, Pchannels: c.heldLocked()[nd.Id]}, nil
}
