package grpcserver

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Reads of the write path: segments, checkpoints and recovery info.

const (
	defaultListSegments = 1000
	maxListSegments     = 10000
)

func apiPosition(p fsm.Position) *coordpb.Position {
	if p.IsZero() {
		return nil
	}
	return &coordpb.Position{Term: p.Term, Offset: p.Offset, Timestamp: p.Timestamp}
}

func apiChannelCheckpoint(cp *fsm.ChannelCheckpoint, now time.Time) *coordpb.ChannelCheckpoint {
	out := &coordpb.ChannelCheckpoint{Vchannel: cp.VChannel, PchannelTerm: cp.PChannelTerm, Position: apiPosition(cp.Position),
		Dropped: cp.Dropped(), NodeId: cp.NodeID}
	if !out.Dropped {
		out.LagMs = max(0, now.UnixMilli()-fsm.PhysicalMs(cp.Position.Timestamp))
	}
	return out
}

func apiSegmentRef(g *fsm.Segment) *coordpb.SegmentRef {
	return &coordpb.SegmentRef{SegmentId: g.ID, PartitionId: g.PartitionID, State: fsm.SegmentStateName(g.State),
		Level: fsm.SegmentLevelName(g.Level), StartPosition: apiPosition(g.Start), DmlPosition: apiPosition(g.DML), NumOfRows: g.NumRows}
}

func apiBinlogs(logs []fsm.LogRef, path func(logID int64) string) []*coordpb.Binlog {
	out := make([]*coordpb.Binlog, len(logs))
	for i, l := range logs {
		out[i] = &coordpb.Binlog{LogId: l.LogID, EntriesNum: l.Entries, TimestampFrom: l.TsFrom, TimestampTo: l.TsTo,
			MemorySize: l.MemorySize, Path: path(l.LogID)}
	}
	return out
}

// apiSegment converts a record; withLogs adds binlogs with derived paths.
func apiSegment(g *fsm.Segment, withLogs bool) *coordpb.SegmentInfo {
	out := &coordpb.SegmentInfo{SegmentId: g.ID, CollectionId: g.CollectionID, PartitionId: g.PartitionID, Vchannel: g.VChannel,
		Level: fsm.SegmentLevelName(g.Level), State: fsm.SegmentStateName(g.State), NumOfRows: g.NumRows, SizeBytes: g.Size,
		StartPosition: apiPosition(g.Start), DmlPosition: apiPosition(g.DML), SealTs: g.SealTs, SealReason: fsm.SealReasonName(g.SealReason),
		StorageVersion: g.StorageVersion, ManifestPath: g.ManifestPath, CreatedUnixMs: g.CreatedMs, DroppedUnixMs: g.DroppedMs,
		BinlogFileCount: int64(g.BinlogFileCount())}
	if !withLogs {
		return out
	}
	for _, f := range g.Binlogs {
		out.FieldBinlogs = append(out.FieldBinlogs, &coordpb.FieldBinlog{FieldId: f.FieldID, Binlogs: apiBinlogs(f.Logs, func(id int64) string {
			return g.InsertLogPath(f.FieldID, id)
		})})
	}
	for _, f := range g.Statslogs {
		out.FieldStatslogs = append(out.FieldStatslogs, &coordpb.FieldBinlog{FieldId: f.FieldID, Binlogs: apiBinlogs(f.Logs, func(id int64) string {
			return g.StatsLogPath(f.FieldID, id)
		})})
	}
	if len(g.Deltalogs) > 0 {
		out.Deltalogs = []*coordpb.FieldBinlog{{Binlogs: apiBinlogs(g.Deltalogs, func(id int64) string {
			return g.DeltaLogPath(id)
		})}}
	}
	out.BinlogPaths = g.InsertLogPaths()
	return out
}

// GetRecoveryInfo returns what a new owner of a VChannel needs
// (docs/semantics.md#recovery). NotFound for a VChannel that never existed.
func (s *Server) GetRecoveryInfo(ctx context.Context, req *coordpb.GetRecoveryInfoRequest) (*coordpb.GetRecoveryInfoResponse, error) {
	if _, ok := vocab.CollectionOfVChannel(req.Vchannel); !ok {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "%q is not a vchannel name", req.Vchannel))
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetRecoveryInfoResponse, error) {
		return coordpb.NewDataCoordClient(c).GetRecoveryInfo(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	ri, err := st.RecoveryInfo(req.Vchannel)
	if errors.Is(err, fsm.ErrUnknownVChannel) {
		return nil, s.toStatus(ctx, vocab.Errorf(errNotFound, "%v", err))
	}
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	out := &coordpb.GetRecoveryInfoResponse{CollectionId: ri.CollectionID, Vchannel: ri.VChannel, Dropped: ri.Dropped}
	if !ri.Dropped {
		out.SeekPosition = apiPosition(ri.Seek)
	} else {
		out.SeekPosition = &coordpb.Position{Timestamp: ri.Seek.Timestamp}
	}
	for _, g := range ri.Unflushed {
		out.Unflushed = append(out.Unflushed, apiSegmentRef(g))
	}
	for _, g := range ri.Flushed {
		out.Flushed = append(out.Flushed, apiSegmentRef(g))
	}
	for _, g := range ri.DroppedSegments {
		out.DroppedSegments = append(out.DroppedSegments, apiSegmentRef(g))
	}
	for _, g := range ri.L0 {
		out.LevelZero = append(out.LevelZero, apiSegmentRef(g))
	}
	return out, nil
}

// GetSegmentInfo returns the listed segments with binlogs (paths derived)
// and the checkpoints of their VChannels; NotFound for the whole call when
// one is missing or, without include_unhealthy, dropped.
func (s *Server) GetSegmentInfo(ctx context.Context, req *coordpb.GetSegmentInfoRequest) (*coordpb.GetSegmentInfoResponse, error) {
	if err := datapath.CheckSegmentInfo(req); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.GetSegmentInfoResponse, error) {
		return coordpb.NewDataCoordClient(c).GetSegmentInfo(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	out := &coordpb.GetSegmentInfoResponse{}
	seen := map[string]bool{}
	now := time.Now()
	for _, id := range req.SegmentIds {
		g, ok := st.Segment(id)
		if !ok || (!g.Healthy() && !req.IncludeUnhealthy) {
			return nil, s.toStatus(ctx, vocab.Errorf(errNotFound, "segment %d does not exist", id))
		}
		out.Segments = append(out.Segments, apiSegment(g, true))
		if !seen[g.VChannel] {
			seen[g.VChannel] = true
			if cp, ok := st.ChannelCheckpoint(g.VChannel); ok {
				out.ChannelCheckpoints = append(out.ChannelCheckpoints, apiChannelCheckpoint(cp, now))
			}
		}
	}
	return out, nil
}

// ListSegments lists segments without binlogs, by ID, filtered and paged.
func (s *Server) ListSegments(ctx context.Context, req *coordpb.ListSegmentsRequest) (*coordpb.ListSegmentsResponse, error) {
	var want fsm.SegmentFilter
	if req.State != "" {
		st, ok := fsm.SegmentStateByName(req.State)
		if !ok {
			return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "unknown state %q (Growing, Sealed, Flushing, Flushed, Dropped, Importing)", req.State))
		}
		want.State = st
	}
	if req.CollectionId < 0 || req.AfterSegmentId < 0 || req.Limit > maxListSegments {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "negative id or limit over %d", maxListSegments))
	}
	if req.Vchannel != "" {
		if _, ok := vocab.CollectionOfVChannel(req.Vchannel); !ok {
			return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "%q is not a vchannel name", req.Vchannel))
		}
	}
	want.CollectionID, want.VChannel, want.After = req.CollectionId, req.Vchannel, req.AfterSegmentId
	limit := int(req.Limit)
	if limit == 0 {
		limit = defaultListSegments
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ListSegmentsResponse, error) {
		return coordpb.NewDataCoordClient(c).ListSegments(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	segs, more := st.ListSegments(want, limit)
	out := &coordpb.ListSegmentsResponse{}
	for _, g := range segs {
		out.Segments = append(out.Segments, apiSegment(g, false))
	}
	if more && len(segs) > 0 {
		out.NextAfterSegmentId = segs[len(segs)-1].ID
	}
	return out, nil
}

// ListChannelCheckpoints lists VChannel checkpoints (one collection's, or
// all) with their lag behind this node's clock.
func (s *Server) ListChannelCheckpoints(ctx context.Context, req *coordpb.ListChannelCheckpointsRequest) (*coordpb.ListChannelCheckpointsResponse, error) {
	if req.CollectionId < 0 {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "collection_id must not be negative"))
	}
	st, resp, done, err := readState(s, ctx, req.Consistency, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ListChannelCheckpointsResponse, error) {
		return coordpb.NewDataCoordClient(c).ListChannelCheckpoints(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	out := &coordpb.ListChannelCheckpointsResponse{}
	now := time.Now()
	for _, cp := range st.ChannelCheckpoints() {
		if req.CollectionId != 0 {
			if c, _ := vocab.CollectionOfVChannel(cp.VChannel); c != req.CollectionId {
				continue
			}
		}
		out.Checkpoints = append(out.Checkpoints, apiChannelCheckpoint(cp, now))
	}
	return out, nil
}
