package grpcserver

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/milvuspb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// milvusServer serves Milvus 2.6's StreamingCoord services on coordd's
// gRPC port (docs/milvus.md). It is a thin adapter: every call is read
// into the request of coordd's own service, which decides, and the answer
// (or refusal) is written back in Milvus's terms. Its methods share names
// with coordd's own (Broadcast, Ack, UpdateReplicateConfiguration), hence
// a type of its own over the Server.
type milvusServer struct {
	milvuspb.UnimplementedStreamingCoordBroadcastServiceServer
	milvuspb.UnimplementedStreamingCoordAssignmentServiceServer
	s *Server
}

// Broadcast reads a Milvus broadcast message (type _t, broadcast header
// _bh with VChannels and resource keys) into a coordd broadcast and runs
// it with coordd's locks, ordering and callbacks; it answers when the task
// is done, with one result per VChannel the header named (coordd's WAL
// position as a message ID of WAL Test, and the time tick) and the
// broadcast ID. A key held by a task already created answers
// RESOURCE_ACQUIRED at once and creates nothing (docs/milvus.md#broadcast).
func (m *milvusServer) Broadcast(ctx context.Context, req *milvuspb.BroadcastRequest) (*milvuspb.BroadcastResponse, error) {
	s := m.s
	mm, br, err := milvusBroadcastRequest(req)
	if err != nil {
		return nil, s.toMilvusStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*milvuspb.BroadcastResponse, error) {
		return milvuspb.NewStreamingCoordBroadcastServiceClient(c).Broadcast(ctx, req, o...)
	}); handled {
		return resp, s.toMilvusStatus(ctx, err)
	}
	if s.broadcasts == nil {
		return nil, status.Error(codes.Unavailable, "broadcaster not configured on this node")
	}
	st := s.node.State()
	if err := checkMilvusTargets(st, mm); err != nil {
		return nil, s.toMilvusStatus(ctx, err)
	}
	if h, held := broadcaster.HeldKey(st, br); held {
		// Milvus's StreamingCoord refuses instead of queueing; a key taken
		// by a task created after this check is waited for as on coordd's
		// own API, and a wait that outlives the deadline is
		// RESOURCE_ACQUIRED too (toMilvusStatus).
		return nil, s.toMilvusStatus(ctx, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_RESOURCE_ACQUIRED,
			"resource key %s is held by broadcast %d (%s) until its targets ack it", h.Key, h.Task, h.MessageType))
	}
	res, err := s.broadcasts.Broadcast(ctx, br)
	if err != nil {
		return nil, s.toMilvusStatus(ctx, err)
	}
	out := &milvuspb.BroadcastResponse{BroadcastId: res.BroadcastID, Results: map[string]*milvuspb.ProduceMessageResponseResult{}}
	named := map[string]bool{}
	for _, v := range mm.header.Vchannels {
		named[v] = true
	}
	for _, cp := range res.Checkpoints {
		if !named[cp.Vchannel] {
			continue // the CChannel coordd added
		}
		id := milvusMessageID(cp.Offset)
		out.Results[cp.Vchannel] = &milvuspb.ProduceMessageResponseResult{Id: id, Timetick: cp.TimeTick, LastConfirmedId: id}
	}
	return out, nil
}

// milvusBroadcastRequest checks a Milvus Broadcast and builds coordd's
// request: the type's name, the payload (coorddPayload), the keys and the
// header's targets. Milvus's broadcasts are acked by coordd's append
// (ack_sync_up off): the answer comes once every target has the message
// and the callback ran.
func milvusBroadcastRequest(req *milvuspb.BroadcastRequest) (milvusMessage, broadcaster.Checked, error) {
	mm, err := readMilvusBroadcast(req.GetMessage())
	if err != nil {
		return mm, broadcaster.Checked{}, err
	}
	keys, err := coorddKeys(mm.header)
	if err != nil {
		return mm, broadcaster.Checked{}, err
	}
	payload, err := coorddPayload(mm)
	if err != nil {
		return mm, broadcaster.Checked{}, err
	}
	br, err := broadcaster.NewRequest(&coordpb.BroadcastRequest{MessageType: mm.typ.String(), Payload: payload,
		ResourceKeys: keys, Vchannels: mm.header.Vchannels})
	if err != nil {
		return mm, br, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "%v", err)
	}
	return mm, br, nil
}

// checkMilvusTargets refuses targets coordd does not know, with
// CHANNEL_NOT_EXIST: every target's PChannel must exist, and a target
// that is neither a PChannel nor the CChannel must be a VChannel of a
// collection, except in the CreateCollection that creates them.
func checkMilvusTargets(st *fsm.State, mm milvusMessage) error {
	known := map[string]bool{}
	for _, c := range st.Collections() {
		for _, v := range c.Vchannels {
			known[v] = true
		}
	}
	for _, v := range mm.header.Vchannels {
		p := vocab.PChannelOf(v)
		if _, ok := st.PChannel(p); !ok {
			return milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST, "vchannel %s: pchannel %s does not exist", v, p)
		}
		if v == p || v == st.CChannel() || known[v] || mm.typ == milvuspb.MessageType_CreateCollection {
			continue
		}
		return milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST, "vchannel %s does not exist (no collection has it)", v)
	}
	return nil
}

// Ack marks one VChannel of a broadcast acked: the broadcast ID from the
// message's broadcast header, the VChannel from _vc, the position from its
// message ID and the time tick from _tt. A Milvus ack names no streaming
// node, so coordd binds it to the VChannel's current owner: the caller
// must hold that node's credential (the same check as coordd's own Ack,
// docs/security.md#per-node-identity), and the checkpoint is taken at the
// owner's current term, which Apply checks again. Repeated and late acks
// change nothing.
func (m *milvusServer) Ack(ctx context.Context, req *milvuspb.BroadcastAckRequest) (*milvuspb.BroadcastAckResponse, error) {
	s := m.s
	id, vch, off, tt, err := readMilvusAck(req)
	if err != nil {
		return nil, s.toMilvusStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*milvuspb.BroadcastAckResponse, error) {
		return milvuspb.NewStreamingCoordBroadcastServiceClient(c).Ack(ctx, req, o...)
	}); handled {
		return resp, s.toMilvusStatus(ctx, err)
	}
	st := s.node.State()
	p, ok := st.PChannel(vocab.PChannelOf(vch))
	if !ok {
		return nil, s.toMilvusStatus(ctx, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST, "vchannel %s: its pchannel does not exist", vch))
	}
	if p.NodeId == 0 || !channels.Assigned(p) {
		return nil, s.toMilvusStatus(ctx, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST,
			"vchannel %s: pchannel %s has no owner now (%s), so no node can ack it", vch, p.Name, channels.StateName(p)))
	}
	n, ok := st.StreamingNode(p.NodeId)
	if !ok {
		return nil, s.toMilvusStatus(ctx, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST,
			"vchannel %s: its owner %d is not registered", vch, p.NodeId))
	}
	caller, err := s.speaksFor(ctx, p.NodeId)
	if err != nil {
		return nil, err // PermissionDenied: the caller is not the owner's credential
	}
	ack, err := broadcaster.NewAck(&coordpb.AckRequest{BroadcastId: id, NodeId: n.Id, Epoch: n.Epoch,
		Checkpoints: []*coordpb.Checkpoint{{Vchannel: vch, Term: p.Term, Offset: off, TimeTick: tt}}})
	if err != nil {
		return nil, s.toMilvusStatus(ctx, err)
	}
	if err := s.ack(ctx, ack.SpokenFor(caller)); err != nil {
		return nil, s.toMilvusStatus(ctx, err)
	}
	return &milvuspb.BroadcastAckResponse{}, nil
}

// readMilvusAck reads an ack's broadcast ID, VChannel, position and time
// tick from its immutable message (the deprecated request fields are
// used only when the message has no broadcast header or VChannel).
func readMilvusAck(req *milvuspb.BroadcastAckRequest) (id uint64, vch string, off, tt uint64, err error) {
	bad := func(format string, a ...any) error {
		return milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, format, a...)
	}
	msg := req.GetMessage()
	if msg == nil {
		return 0, "", 0, 0, bad("the ack carries no message")
	}
	id, vch = req.BroadcastId, req.Vchannel // the deprecated fields, as a fallback
	if bh, ok := msg.Properties[propBroadcast]; ok {
		var h milvuspb.BroadcastHeader
		if err := decodeProp(bh, &h); err != nil {
			return 0, "", 0, 0, bad("broadcast header (property %s): %v", propBroadcast, err)
		}
		id = h.BroadcastId
	}
	if v, ok := msg.Properties[propVChannel]; ok {
		vch = v
	}
	if id == 0 {
		return 0, "", 0, 0, bad("the acked message has no broadcast id (property %s)", propBroadcast)
	}
	if vch == "" {
		return 0, "", 0, 0, bad("the acked message names no vchannel (property %s)", propVChannel)
	}
	if err := vocab.ValidateBroadcastTarget(vch); err != nil {
		return 0, "", 0, 0, bad("vchannel %q: %v", vch, err)
	}
	if off, err = offsetOfMessageID(msg.Id); err != nil {
		return 0, "", 0, 0, err
	}
	t, ok := msg.Properties[propTimeTick]
	if !ok {
		return 0, "", 0, 0, bad("the acked message has no time tick (property %s)", propTimeTick)
	}
	if tt, err = strconv.ParseUint(t, 36, 64); err != nil {
		return 0, "", 0, 0, bad("time tick %q (property %s): %v", t, propTimeTick, err)
	}
	return id, vch, off, tt, nil
}

// errMilvusUnimplemented is the answer to UpdateWALBalancePolicy.
var errMilvusUnimplemented = fmt.Errorf("UpdateWALBalancePolicy is deprecated in Milvus 2.6 and not served by coordd: use coordd's DrainNode/UndrainNode and Rebalance (docs/milvus.md)")
