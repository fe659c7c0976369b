package grpcserver

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Flush seals every growing segment of a collection at a fresh TSO
// timestamp in one command (docs/semantics.md#flush). The channel
// checkpoints returned were read before the seal.
func (s *Server) Flush(ctx context.Context, req *coordpb.FlushRequest) (*coordpb.FlushResponse, error) {
	if req.CollectionId <= 0 {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: collection_id must be positive", errInvalid))
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.FlushResponse, error) {
		return coordpb.NewDataCoordClient(c).Flush(ctx, req, o...)
	}); handled {
		return resp, err
	}
	st, err := s.node.LinearizableRead(ctx)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	coll, ok := st.Collection(req.CollectionId)
	if !ok {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: collection %d has no vchannels", errNotFound, req.CollectionId))
	}
	out := &coordpb.FlushResponse{CollectionId: req.CollectionId}
	now := time.Now()
	for _, v := range coll.Vchannels {
		if cp, ok := st.ChannelCheckpoint(v); ok {
			out.ChannelCheckpoints = append(out.ChannelCheckpoints, apiChannelCheckpoint(cp, now))
		}
	}
	flushTs, err := s.tso.Alloc(ctx, 1)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if _, err := s.data.SealCollection(ctx, req.CollectionId, flushTs); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	out.FlushTs, out.SealTimeUnixMs = flushTs, fsm.PhysicalMs(flushTs)
	for _, g := range s.node.State().SegmentsOfCollection(req.CollectionId) {
		switch {
		case g.State == logpb.SegmentState_SEGMENT_SEALED || g.State == logpb.SegmentState_SEGMENT_FLUSHING:
			out.SealedSegmentIds = append(out.SealedSegmentIds, g.ID)
		case g.State == logpb.SegmentState_SEGMENT_FLUSHED && g.Level != logpb.SegmentLevel_LEVEL_L0:
			out.FlushedSegmentIds = append(out.FlushedSegmentIds, g.ID)
		}
	}
	return out, nil
}

// FlushAll broadcasts a FlushAll message to every PChannel under the
// exclusive Cluster key; its callback records where it landed per PChannel.
func (s *Server) FlushAll(ctx context.Context, req *coordpb.FlushAllRequest) (*coordpb.FlushAllResponse, error) {
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.FlushAllResponse, error) {
		return coordpb.NewDataCoordClient(c).FlushAll(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if s.broadcasts == nil {
		return nil, status.Error(codes.Unavailable, "broadcaster not configured on this node")
	}
	res, err := s.broadcasts.Broadcast(ctx, broadcaster.Request{
		MessageType:  vocab.MsgFlushAll,
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_CLUSTER}},
	})
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	st := s.node.State()
	id, ticks := st.FlushAllTicks()
	if id != res.BroadcastID {
		return nil, status.Errorf(codes.FailedPrecondition, "FlushAll broadcast %d completed but its callback has not recorded it (see coordctl broadcast get %d)", res.BroadcastID, res.BroadcastID)
	}
	out := &coordpb.FlushAllResponse{BroadcastId: id, ClusterId: st.ChannelsMeta().ClusterId, Cchannel: st.CChannel()}
	for _, t := range ticks {
		out.FlushAllTs = append(out.FlushAllTs, &coordpb.PChannelFlushTs{Pchannel: t.Pchannel, TimeTick: t.TimeTick})
		out.FlushAllTsLegacy = max(out.FlushAllTsLegacy, t.TimeTick)
	}
	return out, nil
}

func apiFlushState(st fsm.FlushStatus) *coordpb.GetFlushStateResponse {
	out := &coordpb.GetFlushStateResponse{Flushed: st.Flushed, SegmentsTotal: uint32(st.SegmentsTotal),
		SegmentsFlushed: uint32(st.SegmentsFlushed), VchannelsTotal: uint32(st.VChannelsTotal), VchannelsFlushed: uint32(st.VChannelsFlushed)}
	for _, l := range st.Behind {
		out.Behind = append(out.Behind, &coordpb.FlushLag{Kind: l.Kind, SegmentId: l.SegmentID, Vchannel: l.VChannel,
			State: l.State, CheckpointTs: l.CheckpointTs, TargetTs: l.TargetTs, LagMs: l.LagMs})
	}
	return out
}

// GetFlushState: flushed once every listed segment is Flushed (or gone)
// and every VChannel checkpoint of the collection reached flush_ts;
// otherwise what is behind, slowest first. Linearizable.
func (s *Server) GetFlushState(ctx context.Context, req *coordpb.GetFlushStateRequest) (*coordpb.GetFlushStateResponse, error) {
	if req.CollectionId < 0 || len(req.SegmentIds) > commands.MaxSegmentsPerCmd {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: collection_id must not be negative and at most %d segment ids", errInvalid, commands.MaxSegmentsPerCmd))
	}
	if req.FlushTs == 0 && req.CollectionId > 0 {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: flush_ts is required with a collection", errInvalid))
	}
	st, resp, done, err := readState(s, ctx, coordpb.ReadConsistency_LINEARIZABLE, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetFlushStateResponse, error) {
		return coordpb.NewDataCoordClient(c).GetFlushState(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	fs := st.FlushState(req.SegmentIds, req.FlushTs, req.CollectionId)
	s.wantCheckpoints(fs)
	return apiFlushState(fs), nil
}

// wantCheckpoints tells the flushers (through their next tick report) that
// a waiter needs the checkpoints fs found behind.
func (s *Server) wantCheckpoints(fs fsm.FlushStatus) {
	var vs []string
	for _, l := range fs.Behind {
		if l.Kind == "vchannel" {
			vs = append(vs, l.VChannel)
		}
	}
	s.cpWants.want(vs, time.Now())
}

// GetFlushAllState compares every VChannel's checkpoint with the FlushAll
// time tick of its PChannel (or the legacy single timestamp).
func (s *Server) GetFlushAllState(ctx context.Context, req *coordpb.GetFlushAllStateRequest) (*coordpb.GetFlushStateResponse, error) {
	per := map[string]uint64{}
	for _, t := range req.FlushAllTs {
		per[t.Pchannel] = t.TimeTick
	}
	if len(per) == 0 && req.FlushAllTsLegacy == 0 {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: flush_all_ts or flush_all_ts_legacy is required", errInvalid))
	}
	st, resp, done, err := readState(s, ctx, coordpb.ReadConsistency_LINEARIZABLE, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetFlushStateResponse, error) {
		return coordpb.NewDataCoordClient(c).GetFlushAllState(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	fs, err := st.FlushAllState(per, req.FlushAllTsLegacy)
	if err != nil {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: %v", errInvalid, err))
	}
	s.wantCheckpoints(fs)
	return apiFlushState(fs), nil
}
