package datapath

import (
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// The checked requests. Each constructor turns a coordpb request into a
// value the service takes as is, or refuses it with an ErrInvalid-class
// error (commands.New's, for the requests that are one command); the
// handler builds it once, before forwarding.
//
// A request that names a streaming node session (Node) also has Caller:
// the node identity of the credential the call comes from, which the
// handler sets once it has checked that the caller speaks for the session
// (docs/security.md#per-node-identity), 0 without authentication. The
// service stamps every command it proposes for the call with it
// (commands.CallerNode).

// Save is a checked SaveBinlogPaths request.
type Save struct {
	Node, Caller uint64
	segment      int64
	manifestPath string
	cmd          commands.Command
}

// Checkpoints is a checked UpdateChannelCheckpoints request.
type Checkpoints struct {
	Node, Caller uint64
	cmd          commands.Command
}

// CreateImport is a checked CreateImportSegment request.
type CreateImport struct {
	Node, Caller          uint64
	collection, partition int64
	cmd                   commands.Command
}

// FinishImport is a checked FinishImportSegment request.
type FinishImport struct {
	Node, Caller uint64
	segment      int64
	manifestPath string
	cmd          commands.Command
}

var saveLevels = map[string]logpb.SegmentLevel{"": logpb.SegmentLevel_LEVEL_L1, "L0": logpb.SegmentLevel_LEVEL_L0,
	"L1": logpb.SegmentLevel_LEVEL_L1, "L2": logpb.SegmentLevel_LEVEL_L2}

var importLevels = map[string]logpb.SegmentLevel{"": logpb.SegmentLevel_LEVEL_L1,
	"L1": logpb.SegmentLevel_LEVEL_L1, "L2": logpb.SegmentLevel_LEVEL_L2}

// NewSave checks a SaveBinlogPaths request and builds its command.
func NewSave(req *coordpb.SaveBinlogPathsRequest) (Save, error) {
	level, ok := saveLevels[req.Level]
	if !ok {
		return Save{}, vocab.Errorf(ErrInvalid, "level must be L0, L1 or L2, got %q", req.Level)
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
	c, err := commands.New(b, req.RequestId)
	if err != nil {
		return Save{}, err
	}
	return Save{Node: req.NodeId, segment: req.SegmentId, manifestPath: req.ManifestPath, cmd: c}, nil
}

// NewCheckpoints checks an UpdateChannelCheckpoints request.
func NewCheckpoints(req *coordpb.UpdateChannelCheckpointsRequest) (Checkpoints, error) {
	b := &logpb.UpdateChannelCheckpoints{NodeId: req.NodeId}
	for _, cp := range req.Checkpoints {
		b.Checkpoints = append(b.Checkpoints, &logpb.ChannelCheckpointUpdate{Vchannel: cp.Vchannel,
			PchannelTerm: cp.PchannelTerm, Position: logPosition(cp.Position)})
	}
	c, err := commands.New(b, "")
	if err != nil {
		return Checkpoints{}, err
	}
	return Checkpoints{Node: req.NodeId, cmd: c}, nil
}

// NewCreateImport checks a CreateImportSegment request.
func NewCreateImport(req *coordpb.CreateImportSegmentRequest) (CreateImport, error) {
	level, ok := importLevels[req.Level]
	if !ok {
		return CreateImport{}, vocab.Errorf(ErrInvalid, "an import segment's level is L1 or L2, got %q", req.Level)
	}
	c, err := commands.New(&logpb.CreateImportSegment{CollectionId: req.CollectionId, PartitionId: req.PartitionId,
		Vchannel: req.Vchannel, NodeId: req.NodeId, PchannelTerm: req.PchannelTerm, Level: level}, req.RequestId)
	if err != nil {
		return CreateImport{}, err
	}
	return CreateImport{Node: req.NodeId, cmd: c, collection: req.CollectionId, partition: req.PartitionId}, nil
}

// NewFinishImport checks a FinishImportSegment request.
func NewFinishImport(req *coordpb.FinishImportSegmentRequest) (FinishImport, error) {
	c, err := commands.New(&logpb.FinishImportSegment{SegmentId: req.SegmentId, CollectionId: req.CollectionId,
		Vchannel: req.Vchannel, NodeId: req.NodeId, PchannelTerm: req.PchannelTerm,
		ManifestPath: req.ManifestPath, NumOfRows: req.NumOfRows}, req.RequestId)
	if err != nil {
		return FinishImport{}, err
	}
	return FinishImport{Node: req.NodeId, cmd: c, segment: req.SegmentId, manifestPath: req.ManifestPath}, nil
}

// FlushRequest is a checked Flush request.
type FlushRequest struct{ collection int64 }

// NewFlush checks a Flush request.
func NewFlush(req *coordpb.FlushRequest) (FlushRequest, error) {
	if req.CollectionId <= 0 {
		return FlushRequest{}, vocab.Errorf(ErrInvalid, "collection_id must be positive")
	}
	return FlushRequest{collection: req.CollectionId}, nil
}

// Assign is a checked AssignSegmentID request.
type Assign struct {
	Node, Caller uint64
	reqs         []flush.AssignRequest
}

// NewAssign checks an AssignSegmentID request's shape (the flush manager
// checks each item against the state).
func NewAssign(req *coordpb.AssignSegmentIDRequest) (Assign, error) {
	if req.NodeId == 0 || len(req.Requests) == 0 || len(req.Requests) > flush.MaxAssignPerCall {
		return Assign{}, vocab.Errorf(ErrInvalid, "need node_id and 1..%d requests", flush.MaxAssignPerCall)
	}
	reqs := make([]flush.AssignRequest, len(req.Requests))
	for i, r := range req.Requests {
		reqs[i] = flush.AssignRequest{CollectionID: r.CollectionId, PartitionID: r.PartitionId, VChannel: r.Vchannel,
			PChannelTerm: r.PchannelTerm, Rows: r.Rows, Bytes: r.Bytes}
	}
	return Assign{Node: req.NodeId, reqs: reqs}, nil
}

// Ticks is a checked ReportTimeTicks request.
type Ticks struct {
	Node  uint64
	ticks []flush.TimeTick
}

// NewTicks checks a ReportTimeTicks request's shape.
func NewTicks(req *coordpb.ReportTimeTicksRequest) (Ticks, error) {
	if req.NodeId == 0 || len(req.Ticks) > commands.MaxCheckpointsPerCmd {
		return Ticks{}, vocab.Errorf(ErrInvalid, "need node_id and at most %d ticks", commands.MaxCheckpointsPerCmd)
	}
	ticks := make([]flush.TimeTick, len(req.Ticks))
	for i, t := range req.Ticks {
		ticks[i] = flush.TimeTick{VChannel: t.Vchannel, PChannelTerm: t.PchannelTerm, Tick: t.TimeTick}
	}
	return Ticks{Node: req.NodeId, ticks: ticks}, nil
}

// Heartbeat is a checked Heartbeat request.
type Heartbeat struct {
	Node, Epoch uint64
	seen        *logpb.AssignmentVersion
	held        map[string]int64 // nil: not reported
	interval    time.Duration    // 0: not declared
}

// maxHeartbeatInterval bounds a declared heartbeat interval: a node
// beating less than hourly would be DOWN long before (any sane TTL).
const maxHeartbeatInterval = time.Hour

// NewHeartbeat checks a heartbeat, including its list of held WALs and
// its declared interval (0 or up to maxHeartbeatInterval).
func NewHeartbeat(req *coordpb.HeartbeatRequest) (Heartbeat, error) {
	held, err := heldOf(req)
	if err != nil {
		return Heartbeat{}, err
	}
	ms := req.HeartbeatIntervalMs
	if ms < 0 || ms > maxHeartbeatInterval.Milliseconds() {
		return Heartbeat{}, vocab.Errorf(ErrInvalid, "heartbeat_interval_ms is %d, want 0 (not said) to %d", ms, maxHeartbeatInterval.Milliseconds())
	}
	return Heartbeat{Node: req.NodeId, Epoch: req.Epoch, held: held, interval: time.Duration(ms) * time.Millisecond,
		seen: &logpb.AssignmentVersion{Global: req.SeenVersion.GetGlobal(), Local: req.SeenVersion.GetLocal()}}, nil
}

// heldOf checks a heartbeat's list of held WALs and returns it as
// pchannel -> term (nil when the node does not report them).
func heldOf(req *coordpb.HeartbeatRequest) (map[string]int64, error) {
	if !req.HeldReported {
		if len(req.Held) > 0 {
			return nil, vocab.Errorf(ErrInvalid, "held lists %d pchannels but held_reported is not set", len(req.Held))
		}
		return nil, nil
	}
	if len(req.Held) > fsm.MaxPChannels {
		return nil, vocab.Errorf(ErrInvalid, "held lists %d pchannels (max %d)", len(req.Held), fsm.MaxPChannels)
	}
	held := make(map[string]int64, len(req.Held))
	for _, h := range req.Held {
		if err := vocab.ValidatePChannelName(h.GetPchannel()); err != nil {
			return nil, vocab.Errorf(ErrInvalid, "held: %v", err)
		}
		if h.Term < 1 {
			return nil, vocab.Errorf(ErrInvalid, "held: pchannel %s has term %d, want a positive term", h.Pchannel, h.Term)
		}
		if _, dup := held[h.Pchannel]; dup {
			return nil, vocab.Errorf(ErrInvalid, "held: pchannel %s is listed twice", h.Pchannel)
		}
		held[h.Pchannel] = h.Term
	}
	return held, nil
}

// Registration is a checked RegisterStreamingNode request, bound to the
// caller's node identity (0 without authentication).
type Registration struct {
	address, group, incarnation string
	bound                       uint64
}

// NewRegistration checks a registration bound to node identity bound.
func NewRegistration(req *coordpb.RegisterStreamingNodeRequest, bound uint64) (Registration, error) {
	r := Registration{address: req.Address, group: req.ResourceGroup, incarnation: req.Incarnation, bound: bound}
	if _, err := commands.New(r.body(), ""); err != nil {
		return Registration{}, err
	}
	return r, nil
}

// body is the registration's command body (the leader adds the node it
// replaces, if any).
func (r Registration) body() *logpb.RegisterStreamingNode {
	return &logpb.RegisterStreamingNode{Address: r.address, ResourceGroup: r.group, Incarnation: r.incarnation, BoundNode: r.bound}
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
