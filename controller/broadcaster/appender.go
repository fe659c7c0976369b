package broadcaster

import (
	"context"
	"crypto/tls"
	"errors"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/conncache"
)

// Appender appends one broadcast message to the owner of a VChannel's
// PChannel. The node dedups by (broadcastID, vchannel): a retried append
// returns the original position. The checkpoint carries the message ID's
// term and offset and the message timestamp as its time tick.
type Appender interface {
	// Append writes the message to vchannel on node at pchannelTerm, fenced
	// by coordTerm, and returns its checkpoint; an error leaves the target
	// unacked, to be retried.
	Append(ctx context.Context, node NodeTarget, vchannel string, pchannelTerm int64, payload []byte,
		broadcastID uint64, ackSyncUp bool, coordTerm uint64) (*logpb.VChannelCheckpoint, error)
}

// NodeTarget names the streaming node an append is meant for: its address
// and the registration (ID and epoch) the node checks, so an append never
// lands on another process that now serves the same address.
type NodeTarget struct {
	Addr  string
	ID    uint64
	Epoch uint64
	// Bound is the node identity the registration is bound to (0: none);
	// over TLS the node's certificate must not name another one
	// (conncache.CheckNode).
	Bound uint64
}

// MDCoordTerm is the gRPC metadata key that also carries the coordinator's
// raft term on Append. The node fences by AppendRequest.coord_term (the
// field, also on every AppendBatch item); the metadata is kept only for
// what reads it on the wire.
const MDCoordTerm = "coordd-coord-term"

// GRPCAppender is the Appender (and BatchAppender) over
// coordpb.StreamingNodeService, with one connection per node address
// (unused ones are closed, conncache).
type GRPCAppender struct {
	conns *conncache.Cache
	// noBatch: registrations that do not serve AppendBatch.
	noBatch noBatchNodes
}

// NewGRPCAppender returns an appender that dials nodes lazily, with TLS
// tlsCfg (plaintext when nil): on a secure cluster coordd presents its
// server certificate, which the node requires of a coordinator append,
// and verifies the node's (security.StreamingNodeClient).
func NewGRPCAppender(tlsCfg *tls.Config) *GRPCAppender {
	var opts []grpc.DialOption
	if tlsCfg != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	}
	return &GRPCAppender{conns: conncache.New(0, nil, opts...)}
}

var errAppenderClosed = errors.New("broadcaster: appender closed")

func (a *GRPCAppender) client(addr string) (coordpb.StreamingNodeServiceClient, error) {
	conn, err := a.conns.Get(addr)
	if errors.Is(err, conncache.ErrClosed) {
		return nil, errAppenderClosed
	}
	if err != nil {
		return nil, err
	}
	return coordpb.NewStreamingNodeServiceClient(conn), nil
}

// Append implements Appender.
func (a *GRPCAppender) Append(ctx context.Context, node NodeTarget, vchannel string, pchannelTerm int64, payload []byte,
	broadcastID uint64, ackSyncUp bool, coordTerm uint64) (*logpb.VChannelCheckpoint, error) {
	nodeAddr := node.Addr
	cl, err := a.client(nodeAddr)
	if err != nil {
		return nil, err
	}
	ctx = metadata.AppendToOutgoingContext(ctx, MDCoordTerm, strconv.FormatUint(coordTerm, 10))
	var p peer.Peer
	resp, err := cl.Append(ctx, &coordpb.AppendRequest{Vchannel: vchannel, Term: pchannelTerm, Payload: payload,
		BroadcastId: broadcastID, AckSyncUp: ackSyncUp, CoordTerm: coordTerm, NodeId: node.ID, Epoch: node.Epoch}, grpc.Peer(&p))
	if err != nil {
		return nil, err
	}
	if err := conncache.CheckNode(&p, node.Bound); err != nil {
		// Not the owner's WAL: the target stays unacked.
		return nil, status.Errorf(codes.PermissionDenied, "append to %s on %s: %v", vchannel, nodeAddr, err)
	}
	return checkpointOf(vchannel, nodeAddr, resp)
}

// checkpointOf is the checkpoint of a successful append of vchannel on
// nodeAddr, or Internal for an answer without a message ID or timestamp.
func checkpointOf(vchannel, nodeAddr string, resp *coordpb.AppendResponse) (*logpb.VChannelCheckpoint, error) {
	if resp.GetId() == nil || resp.Id.Term < 1 || resp.Timestamp == 0 {
		return nil, status.Errorf(codes.Internal, "append to %s on %s: response without a message id or timestamp", vchannel, nodeAddr)
	}
	return &logpb.VChannelCheckpoint{Vchannel: vchannel, Term: resp.Id.Term, Offset: resp.Id.Offset, TimeTick: resp.Timestamp}, nil
}

// Close drops every connection; later appends fail.
func (a *GRPCAppender) Close() { a.conns.Close() }

// unrecoverableCode says whether an append error can never succeed by
// retrying (the same request would be refused again), and its label.
func unrecoverableCode(err error) (string, bool) {
	s, ok := status.FromError(err)
	if !ok {
		return "", false
	}
	switch s.Code() {
	case codes.InvalidArgument, codes.OutOfRange, codes.Unimplemented, codes.PermissionDenied,
		codes.Unauthenticated, codes.DataLoss:
		return s.Code().String(), true
	}
	return "", false
}

// ownershipError says whether an append failed because the channel is not
// where the FSM says at that term (likely to change with the assignment).
func ownershipError(err error) bool {
	var nf *notAssignedError
	if errors.As(err, &nf) {
		return true
	}
	s, ok := status.FromError(err)
	return ok && (s.Code() == codes.FailedPrecondition || s.Code() == codes.Unavailable)
}
