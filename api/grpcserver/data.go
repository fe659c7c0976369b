package grpcserver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// The write path's flusher-facing RPCs (docs/semantics.md#segments).
// Allocations and time ticks are answered from the leader's memory; saves
// and checkpoints are commands whose owner check runs inside Apply.

// Data is the leader's write-path manager (for metrics and benchmarks).
func (s *Server) Data() *flush.Manager { return s.data }

// AssignSegmentID places rows in growing segments of the caller's
// VChannels (leader memory; only segment creation is logged).
func (s *Server) AssignSegmentID(ctx context.Context, req *coordpb.AssignSegmentIDRequest) (*coordpb.AssignSegmentIDResponse, error) {
	if req.NodeId == 0 || len(req.Requests) == 0 || len(req.Requests) > flush.MaxAssignPerCall {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: need node_id and 1..%d requests", errInvalid, flush.MaxAssignPerCall))
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AssignSegmentIDResponse, error) {
		return coordpb.NewDataCoordClient(c).AssignSegmentID(ctx, req, o...)
	}); handled {
		return resp, err
	}
	sctx, err := s.speaksFor(ctx, s.node.State(), req.NodeId)
	if err != nil {
		return nil, err
	}
	ctx = sctx // what the call proposes is stamped with the caller's node
	reqs := make([]flush.AssignRequest, len(req.Requests))
	for i, r := range req.Requests {
		reqs[i] = flush.AssignRequest{CollectionID: r.CollectionId, PartitionID: r.PartitionId, VChannel: r.Vchannel,
			PChannelTerm: r.PchannelTerm, Rows: r.Rows, Bytes: r.Bytes}
	}
	as, err := s.data.AssignSegmentID(ctx, req.NodeId, reqs)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	out := &coordpb.AssignSegmentIDResponse{Assignments: make([]*coordpb.SegmentIDAssignment, len(as))}
	for i, a := range as {
		r := req.Requests[i]
		out.Assignments[i] = &coordpb.SegmentIDAssignment{SegmentId: a.SegmentID, CollectionId: r.CollectionId,
			PartitionId: r.PartitionId, Vchannel: r.Vchannel, Rows: r.Rows, Bytes: r.Bytes,
			ExpireTs: a.ExpireTs, ExpireUnixMs: a.Expire.UnixMilli()}
	}
	return out, nil
}

// ReportTimeTicks records per-VChannel consumed time ticks from their
// owners (leader memory).
func (s *Server) ReportTimeTicks(ctx context.Context, req *coordpb.ReportTimeTicksRequest) (*coordpb.ReportTimeTicksResponse, error) {
	if req.NodeId == 0 || len(req.Ticks) > commands.MaxCheckpointsPerCmd {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: need node_id and at most %d ticks", errInvalid, commands.MaxCheckpointsPerCmd))
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ReportTimeTicksResponse, error) {
		return coordpb.NewDataCoordClient(c).ReportTimeTicks(ctx, req, o...)
	}); handled {
		return resp, err
	}
	sctx, err := s.speaksFor(ctx, s.node.State(), req.NodeId)
	if err != nil {
		return nil, err
	}
	ctx = sctx // what the call proposes is stamped with the caller's node
	ticks := make([]flush.TimeTick, len(req.Ticks))
	for i, t := range req.Ticks {
		ticks[i] = flush.TimeTick{VChannel: t.Vchannel, PChannelTerm: t.PchannelTerm, Tick: t.TimeTick}
	}
	acc, refused, err := s.data.ReportTimeTicks(req.NodeId, ticks)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	vs := make([]string, len(req.Ticks))
	for i, t := range req.Ticks {
		vs[i] = t.Vchannel
	}
	return &coordpb.ReportTimeTicksResponse{Accepted: uint32(acc), Refused: refused,
		CheckpointWanted: s.cpWants.wanted(vs, time.Now()), TickWanted: ticksWanted(s.node.State(), req.Ticks)}, nil
}

// ticksWanted lists the VChannels of ticks with a sealed segment whose
// seal time the reported tick has not passed: the flush of that segment
// waits for a fresh tick from its owner.
func ticksWanted(st *fsm.State, ticks []*coordpb.ChannelTimeTick) []string {
	var out []string
	for _, t := range ticks {
		for _, g := range st.SegmentsOfVChannel(t.Vchannel) {
			if g.State == logpb.SegmentState_SEGMENT_SEALED && g.SealTs > t.TimeTick {
				out = append(out, t.Vchannel)
				break
			}
		}
	}
	return out
}

func logPosition(p *coordpb.Position) *logpb.WALPosition {
	if p == nil {
		return nil
	}
	return &logpb.WALPosition{Term: p.Term, Offset: p.Offset, Timestamp: p.Timestamp}
}

func logLogs(in []*coordpb.Binlog) []*logpb.LogRef {
	var out []*logpb.LogRef
	for _, b := range in {
		out = append(out, &logpb.LogRef{LogId: b.LogId, EntriesNum: b.EntriesNum, TimestampFrom: b.TimestampFrom,
			TimestampTo: b.TimestampTo, MemorySize: b.MemorySize})
	}
	return out
}

func logFieldLogs(in []*coordpb.FieldBinlog) []*logpb.FieldLogs {
	var out []*logpb.FieldLogs
	for _, f := range in {
		out = append(out, &logpb.FieldLogs{FieldId: f.FieldId, Logs: logLogs(f.Binlogs)})
	}
	return out
}

var levelsByName = map[string]logpb.SegmentLevel{"": logpb.SegmentLevel_LEVEL_L1, "L0": logpb.SegmentLevel_LEVEL_L0,
	"L1": logpb.SegmentLevel_LEVEL_L1, "L2": logpb.SegmentLevel_LEVEL_L2}

// saveBody converts and validates a SaveBinlogPaths request.
func saveBody(req *coordpb.SaveBinlogPathsRequest) (commands.Command, error) {
	level, ok := levelsByName[req.Level]
	if !ok {
		return commands.Command{}, fmt.Errorf("%w: level must be L0, L1 or L2, got %q", errInvalid, req.Level)
	}
	b := &logpb.SaveBinlogPaths{NodeId: req.NodeId, Vchannel: req.Vchannel, PchannelTerm: req.PchannelTerm,
		SegmentId: req.SegmentId, CollectionId: req.CollectionId, PartitionId: req.PartitionId, Level: level,
		Binlogs: logFieldLogs(req.FieldBinlogs), Statslogs: logFieldLogs(req.FieldStatslogs),
		Flushed: req.Flushed, Dropped: req.Dropped, WithFullBinlogs: req.WithFullBinlogs,
		StorageVersion: req.StorageVersion, ManifestPath: req.ManifestPath, AfterDml: req.AfterDml}
	for _, f := range req.Deltalogs {
		b.Deltalogs = append(b.Deltalogs, logLogs(f.Binlogs)...)
	}
	for _, cp := range req.Checkpoints {
		b.Checkpoints = append(b.Checkpoints, &logpb.SegmentCheckpointUpdate{SegmentId: cp.SegmentId,
			Position: logPosition(cp.Position), NumOfRows: cp.NumOfRows})
	}
	for _, sp := range req.StartPositions {
		b.StartPositions = append(b.StartPositions, &logpb.SegmentStartUpdate{SegmentId: sp.SegmentId, Position: logPosition(sp.Position)})
	}
	return commands.New(b, req.RequestId)
}

// SaveBinlogPaths records one segment's binlogs, positions and state. A
// stale request answers stale=true and writes nothing.
func (s *Server) SaveBinlogPaths(ctx context.Context, req *coordpb.SaveBinlogPathsRequest) (*coordpb.SaveBinlogPathsResponse, error) {
	c, err := saveBody(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.SaveBinlogPathsResponse, error) {
		return coordpb.NewDataCoordClient(cc).SaveBinlogPaths(ctx, req, o...)
	}); handled {
		return resp, err
	}
	sctx, err := s.speaksFor(ctx, s.node.State(), req.NodeId)
	if err != nil {
		return nil, err
	}
	ctx = sctx // what the call proposes is stamped with the caller's node
	if err := s.manifests.CheckNamedRevision(ctx, s.node.State(), req.SegmentId, req.ManifestPath); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	var sealedMs int64
	if g, ok := s.node.State().Segment(req.SegmentId); ok {
		sealedMs = g.SealedMs
	}
	res, err := s.commit(ctx, c)
	if err != nil {
		return nil, err
	}
	r := res.GetSaveBinlogs()
	if !r.Stale && r.State == logpb.SegmentState_SEGMENT_FLUSHED {
		s.data.ObserveFlushed(sealedMs)
	}
	return &coordpb.SaveBinlogPathsResponse{Stale: r.Stale, State: fsm.SegmentStateName(r.State)}, nil
}

// UpdateChannelCheckpoints advances a batch of VChannel checkpoints in one
// command; refused entries are listed, not errors.
func (s *Server) UpdateChannelCheckpoints(ctx context.Context, req *coordpb.UpdateChannelCheckpointsRequest) (*coordpb.UpdateChannelCheckpointsResponse, error) {
	b := &logpb.UpdateChannelCheckpoints{NodeId: req.NodeId}
	for _, cp := range req.Checkpoints {
		b.Checkpoints = append(b.Checkpoints, &logpb.ChannelCheckpointUpdate{Vchannel: cp.Vchannel,
			PchannelTerm: cp.PchannelTerm, Position: logPosition(cp.Position)})
	}
	c, err := commands.New(b, "")
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.UpdateChannelCheckpointsResponse, error) {
		return coordpb.NewDataCoordClient(cc).UpdateChannelCheckpoints(ctx, req, o...)
	}); handled {
		return resp, err
	}
	sctx, err := s.speaksFor(ctx, s.node.State(), req.NodeId)
	if err != nil {
		return nil, err
	}
	ctx = sctx // what the call proposes is stamped with the caller's node
	// Fail fast on the leader: a checkpoint not newer than the stored one
	// (checkpoints only grow) or for a dropped VChannel is refused without
	// a log entry; Apply checks everything again for the rest.
	var refused []string
	keep := b.Checkpoints[:0:0]
	st := s.node.State()
	for _, u := range b.Checkpoints {
		if old, ok := st.ChannelCheckpoint(u.Vchannel); ok {
			if old.Dropped() {
				refused = append(refused, u.Vchannel+": vchannel is dropped")
				continue
			}
			if !old.Position.Less(fsm.Position{Term: u.Position.Term, Offset: u.Position.Offset, Timestamp: u.Position.Timestamp}) {
				refused = append(refused, u.Vchannel+": not newer than the stored checkpoint")
				continue
			}
		}
		keep = append(keep, u)
	}
	if len(keep) == 0 {
		return &coordpb.UpdateChannelCheckpointsResponse{Refused: refused}, nil
	}
	if len(keep) < len(b.Checkpoints) {
		if c, err = commands.New(&logpb.UpdateChannelCheckpoints{NodeId: b.NodeId, Checkpoints: keep}, ""); err != nil {
			return nil, s.toStatus(ctx, err)
		}
	}
	res, err := s.commit(ctx, c)
	if err != nil {
		return nil, err
	}
	r := res.GetCheckpoints()
	return &coordpb.UpdateChannelCheckpointsResponse{Accepted: r.GetAccepted(), Refused: append(refused, r.GetRefused()...)}, nil
}

// flushTasks is the current flush work of a streaming-node session: the
// Flushing segments on the PChannels it holds, by segment ID.
func flushTasks(st *fsm.State, node uint64) []*coordpb.FlushTask {
	var out []*coordpb.FlushTask
	if st.SegmentCountIn(logpb.SegmentState_SEGMENT_FLUSHING) == 0 {
		// The common case, answered without a scan: every watcher
		// recomputes its set on every applied batch.
		return out
	}
	st.EachActiveSegment(func(g *fsm.Segment) bool {
		if g.State != logpb.SegmentState_SEGMENT_FLUSHING {
			return true
		}
		p, ok := st.PChannel(vocab.PChannelOf(g.VChannel))
		if !ok || p.NodeId != node || (p.State != logpb.PChannelState_PCHANNEL_ASSIGNED && p.State != logpb.PChannelState_PCHANNEL_ASSIGNING) {
			return true
		}
		out = append(out, &coordpb.FlushTask{SegmentId: g.ID, CollectionId: g.CollectionID, PartitionId: g.PartitionID,
			Vchannel: g.VChannel, PchannelTerm: p.Term, SealTs: g.SealTs, Level: fsm.SegmentLevelName(g.Level)})
		return true
	})
	return out
}

// CurrentFlushTasks is WatchFlushTasks's current set, once (for HTTP).
func (s *Server) CurrentFlushTasks(ctx context.Context, req *coordpb.WatchFlushTasksRequest) (*coordpb.FlushTasks, error) {
	if req.NodeId == 0 {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: node_id is required", errInvalid))
	}
	st := s.node.State()
	if _, err := s.speaksFor(ctx, st, req.NodeId); err != nil {
		return nil, err
	}
	if err := checkSession(st, req.NodeId, req.Epoch); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.FlushTasks{Tasks: flushTasks(st, req.NodeId)}, nil
}

// checkSession: node must be a live session with this epoch.
func checkSession(st *fsm.State, node, epoch uint64) error {
	n, ok := st.StreamingNode(node)
	if !ok {
		return fmt.Errorf("%w: streaming node %d", errNotFound, node)
	}
	if n.Epoch != epoch || n.State == logpb.NodeState_NODE_DOWN {
		return fmt.Errorf("%w: node %d session is epoch %d (%s), not %d", errPrecondition, node, n.Epoch, n.State, epoch)
	}
	return nil
}

// WatchFlushTasks streams a session's flush work from this member's applied
// state (any member serves it): the complete set first, then again every
// time it changes. It ends when the session ends.
func (s *Server) WatchFlushTasks(req *coordpb.WatchFlushTasksRequest, stream grpc.ServerStreamingServer[coordpb.FlushTasks]) error {
	ctx := stream.Context()
	if req.NodeId == 0 {
		return s.toStatus(ctx, fmt.Errorf("%w: node_id is required", errInvalid))
	}
	var last []*coordpb.FlushTask
	first := true
	for {
		changed := s.node.StateChanged()
		st := s.node.State()
		if first {
			if _, err := s.speaksFor(ctx, st, req.NodeId); err != nil {
				return err
			}
		}
		if err := checkSession(st, req.NodeId, req.Epoch); err != nil {
			return s.toStatus(ctx, err)
		}
		tasks := flushTasks(st, req.NodeId)
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
