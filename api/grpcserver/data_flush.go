package grpcserver

import (
	"context"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Flush seals every growing segment of a collection at a fresh TSO
// timestamp in one command (docs/semantics.md#flush). The channel
// checkpoints returned were read before the seal.
func (s *Server) Flush(ctx context.Context, req *coordpb.FlushRequest) (*coordpb.FlushResponse, error) {
	f, err := datapath.NewFlush(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.FlushResponse, error) {
		return coordpb.NewDataCoordClient(c).Flush(ctx, req, o...)
	}); handled {
		return resp, err
	}
	r, err := s.dataPath.Flush(ctx, f)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	out := &coordpb.FlushResponse{CollectionId: req.CollectionId, FlushTs: r.FlushTs, SealTimeUnixMs: fsm.PhysicalMs(r.FlushTs),
		SealedSegmentIds: r.Sealed, FlushedSegmentIds: r.Flushed}
	for _, cp := range r.Checkpoints {
		out.ChannelCheckpoints = append(out.ChannelCheckpoints, apiChannelCheckpoint(cp, r.At))
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
	r, err := s.dataPath.FlushAll(ctx)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	out := &coordpb.FlushAllResponse{BroadcastId: r.BroadcastID, ClusterId: r.ClusterID, Cchannel: r.CChannel}
	for _, t := range r.Ticks {
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
	if err := datapath.CheckFlushState(req); err != nil {
		return nil, s.toStatus(ctx, err)
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
	s.dataPath.WantCheckpoints(vs)
}

// GetFlushAllState compares every VChannel's checkpoint with the FlushAll
// time tick of its PChannel (or the legacy single timestamp).
func (s *Server) GetFlushAllState(ctx context.Context, req *coordpb.GetFlushAllStateRequest) (*coordpb.GetFlushStateResponse, error) {
	per := map[string]uint64{}
	for _, t := range req.FlushAllTs {
		per[t.Pchannel] = t.TimeTick
	}
	if len(per) == 0 && req.FlushAllTsLegacy == 0 {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "flush_all_ts or flush_all_ts_legacy is required"))
	}
	st, resp, done, err := readState(s, ctx, coordpb.ReadConsistency_LINEARIZABLE, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetFlushStateResponse, error) {
		return coordpb.NewDataCoordClient(c).GetFlushAllState(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	fs, err := st.FlushAllState(per, req.FlushAllTsLegacy)
	if err != nil {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "%v", err))
	}
	s.wantCheckpoints(fs)
	return apiFlushState(fs), nil
}
