package grpcserver

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// The write path's flusher-facing RPCs (docs/semantics.md#segments).
// Allocations and time ticks are answered from the leader's memory; saves
// and checkpoints are commands whose owner check runs inside Apply.

// AssignSegmentID places rows in growing segments of the caller's
// VChannels (leader memory; only segment creation is logged).
func (s *Server) AssignSegmentID(ctx context.Context, req *coordpb.AssignSegmentIDRequest) (*coordpb.AssignSegmentIDResponse, error) {
	a, err := datapath.NewAssign(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AssignSegmentIDResponse, error) {
		return coordpb.NewDataCoordClient(c).AssignSegmentID(ctx, req, o...)
	}); handled {
		return resp, err
	}
	a.Caller, err = s.speaksFor(ctx, a.Node) // what the call proposes is stamped with the caller's node
	if err != nil {
		return nil, err
	}
	as, err := s.dataPath.AssignSegmentID(ctx, a)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return datapath.AssignReply(req, as), nil
}

// ReportTimeTicks records per-VChannel consumed time ticks from their
// owners (leader memory).
func (s *Server) ReportTimeTicks(ctx context.Context, req *coordpb.ReportTimeTicksRequest) (*coordpb.ReportTimeTicksResponse, error) {
	ticks, err := datapath.NewTicks(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ReportTimeTicksResponse, error) {
		return coordpb.NewDataCoordClient(c).ReportTimeTicks(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if _, err := s.speaksFor(ctx, ticks.Node); err != nil { // time ticks propose nothing
		return nil, err
	}
	r, err := s.dataPath.ReportTimeTicks(ctx, ticks)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.ReportTimeTicksResponse{Accepted: uint32(r.Accepted), Refused: r.Refused,
		CheckpointWanted: r.CheckpointWanted, TickWanted: r.TickWanted}, nil
}

// SaveBinlogPaths records one segment's binlogs, positions and state. A
// stale request answers stale=true and writes nothing.
func (s *Server) SaveBinlogPaths(ctx context.Context, req *coordpb.SaveBinlogPathsRequest) (*coordpb.SaveBinlogPathsResponse, error) {
	save, err := datapath.NewSave(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.SaveBinlogPathsResponse, error) {
		return coordpb.NewDataCoordClient(cc).SaveBinlogPaths(ctx, req, o...)
	}); handled {
		return resp, err
	}
	save.Caller, err = s.speaksFor(ctx, save.Node)
	if err != nil {
		return nil, err
	}
	r, err := s.dataPath.SaveBinlogPaths(ctx, save)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.SaveBinlogPathsResponse{Stale: r.Stale, State: fsm.SegmentStateName(r.State)}, nil
}

// UpdateChannelCheckpoints advances a batch of VChannel checkpoints in one
// command; refused entries are listed, not errors.
func (s *Server) UpdateChannelCheckpoints(ctx context.Context, req *coordpb.UpdateChannelCheckpointsRequest) (*coordpb.UpdateChannelCheckpointsResponse, error) {
	cps, err := datapath.NewCheckpoints(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.UpdateChannelCheckpointsResponse, error) {
		return coordpb.NewDataCoordClient(cc).UpdateChannelCheckpoints(ctx, req, o...)
	}); handled {
		return resp, err
	}
	cps.Caller, err = s.speaksFor(ctx, cps.Node)
	if err != nil {
		return nil, err
	}
	r, err := s.dataPath.UpdateChannelCheckpoints(ctx, cps)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.UpdateChannelCheckpointsResponse{Accepted: r.Accepted, Refused: r.Refused}, nil
}

func apiFlushTasks(ts []datapath.Task) []*coordpb.FlushTask {
	var out []*coordpb.FlushTask
	for _, t := range ts {
		g := t.Segment
		out = append(out, &coordpb.FlushTask{SegmentId: g.ID, CollectionId: g.CollectionID, PartitionId: g.PartitionID,
			Vchannel: g.VChannel, PchannelTerm: t.PChannelTerm, SealTs: g.SealTs, Level: fsm.SegmentLevelName(g.Level)})
	}
	return out
}

// CurrentFlushTasks is WatchFlushTasks's current set, once (for HTTP).
func (s *Server) CurrentFlushTasks(ctx context.Context, req *coordpb.WatchFlushTasksRequest) (*coordpb.FlushTasks, error) {
	if req.NodeId == 0 {
		return nil, s.toStatus(ctx, vocab.Errorf(errInvalid, "node_id is required"))
	}
	if _, err := s.speaksFor(ctx, req.NodeId); err != nil {
		return nil, err
	}
	tasks, err := s.dataPath.FlushTasks(req.NodeId, req.Epoch)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.FlushTasks{Tasks: apiFlushTasks(tasks)}, nil
}

// WatchFlushTasks streams a session's flush work from this member's applied
// state (any member serves it): the complete set first, then again every
// time it changes. It ends when the session ends.
func (s *Server) WatchFlushTasks(req *coordpb.WatchFlushTasksRequest, stream grpc.ServerStreamingServer[coordpb.FlushTasks]) error {
	ctx := stream.Context()
	if req.NodeId == 0 {
		return s.toStatus(ctx, vocab.Errorf(errInvalid, "node_id is required"))
	}
	if _, err := s.speaksFor(ctx, req.NodeId); err != nil {
		return err
	}
	var last []*coordpb.FlushTask
	first := true
	for {
		changed := s.node.StateChanged()
		ts, err := s.dataPath.FlushTasks(req.NodeId, req.Epoch)
		if err != nil {
			return s.toStatus(ctx, err)
		}
		tasks := apiFlushTasks(ts)
		if first || !slices.EqualFunc(tasks, last, func(a, b *coordpb.FlushTask) bool { return proto.Equal(a, b) }) {
			if err := stream.Send(&coordpb.FlushTasks{Tasks: tasks}); err != nil {
				return err
			}
			last, first = tasks, false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return nil
		case <-changed:
		}
	}
}
