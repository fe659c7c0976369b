package grpcserver

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/testutil"
	"github.com/coordd/coordd/vocab"
)

const dataColl = int64(100)

var (
	dv0 = vocab.VChannelName("dml_0", dataColl, 0)
	dv1 = vocab.VChannelName("dml_1", dataColl, 1)
)

// startDataNode is a one-member cluster with node 1 holding dml_0 and
// node 2 holding dml_1 (both at PChannel term 2) and collection 100 on
// them; allocations expire after 50 ms and rounds run every 20 ms.
func startDataNode(t *testing.T) (*testNode, coordpb.DataCoordClient) {
	t.Helper()
	tn := startTestNodeCfg(t, routines.Config{Data: flush.Config{AllocationExpiry: 50 * time.Millisecond, Interval: 20 * time.Millisecond}})
	for _, body := range []proto.Message{
		&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0", "dml_1"}},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9001", Incarnation: "a"},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9002", Incarnation: "b"},
		&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "dml_0", NodeId: 1, ExpectedTerm: 1}, {Pchannel: "dml_1", NodeId: 2, ExpectedTerm: 1}}},
		&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}, {Pchannel: "dml_1", Term: 2}}},
		&logpb.AllocVirtualChannels{CollectionId: dataColl, Count: 2},
	} {
		c, err := commands.New(body, "")
		if err != nil {
			t.Fatal(err)
		}
		res, err := tn.node.Propose(callCtx(t), c)
		if err != nil || res.Rejection != nil {
			t.Fatalf("setup %s: %v %v", c.Type, err, res.GetRejection())
		}
	}
	return tn, coordpb.NewDataCoordClient(tn.conn)
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

func TestDataBadInputChangesNothing(t *testing.T) {
	tn, dc := startDataNode(t)
	ctx := callCtx(t)
	before := tn.node.State().AppliedIndex()
	seg := &coordpb.SegmentIDRequest{CollectionId: dataColl, PartitionId: 1, Vchannel: dv0, PchannelTerm: 2, Rows: 1, Bytes: 10}
	_, err := dc.AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: 1})
	wantCode(t, "AssignSegmentID without requests", err, codes.InvalidArgument)
	_, err = dc.AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: 2, Requests: []*coordpb.SegmentIDRequest{seg}})
	wantCode(t, "AssignSegmentID from a non-owner", err, codes.Aborted)
	bad := proto.Clone(seg).(*coordpb.SegmentIDRequest)
	bad.Vchannel = vocab.VChannelName("dml_0", 999, 0)
	bad.CollectionId = 999
	_, err = dc.AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: 1, Requests: []*coordpb.SegmentIDRequest{bad}})
	wantCode(t, "AssignSegmentID for an unknown collection", err, codes.NotFound)
	_, err = dc.ReportTimeTicks(ctx, &coordpb.ReportTimeTicksRequest{})
	wantCode(t, "ReportTimeTicks without node", err, codes.InvalidArgument)
	_, err = dc.SaveBinlogPaths(ctx, &coordpb.SaveBinlogPathsRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, SegmentId: 1, CollectionId: dataColl, Level: "L7"})
	wantCode(t, "SaveBinlogPaths with a bad level", err, codes.InvalidArgument)
	_, err = dc.SaveBinlogPaths(ctx, &coordpb.SaveBinlogPathsRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, SegmentId: 0, CollectionId: dataColl})
	wantCode(t, "SaveBinlogPaths without a segment", err, codes.InvalidArgument)
	_, err = dc.UpdateChannelCheckpoints(ctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: 1})
	wantCode(t, "UpdateChannelCheckpoints without checkpoints", err, codes.InvalidArgument)
	_, err = dc.UpdateChannelCheckpoints(ctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: 1, Checkpoints: []*coordpb.ChannelCheckpoint{
		{Vchannel: dv0, PchannelTerm: 2, Position: &coordpb.Position{Timestamp: commands.DroppedTimestamp}}}})
	wantCode(t, "UpdateChannelCheckpoints with the dropped sentinel", err, codes.InvalidArgument)
	_, err = dc.Flush(ctx, &coordpb.FlushRequest{})
	wantCode(t, "Flush without collection", err, codes.InvalidArgument)
	_, err = dc.Flush(ctx, &coordpb.FlushRequest{CollectionId: 5})
	wantCode(t, "Flush of an unknown collection", err, codes.NotFound)
	_, err = dc.GetFlushState(ctx, &coordpb.GetFlushStateRequest{CollectionId: dataColl})
	wantCode(t, "GetFlushState without flush_ts", err, codes.InvalidArgument)
	_, err = dc.GetFlushAllState(ctx, &coordpb.GetFlushAllStateRequest{})
	wantCode(t, "GetFlushAllState without timestamps", err, codes.InvalidArgument)
	_, err = dc.GetFlushAllState(ctx, &coordpb.GetFlushAllStateRequest{FlushAllTs: []*coordpb.PChannelFlushTs{{Pchannel: "dml_0", TimeTick: 5}}})
	wantCode(t, "GetFlushAllState missing a pchannel", err, codes.InvalidArgument)
	_, err = dc.GetRecoveryInfo(ctx, &coordpb.GetRecoveryInfoRequest{Vchannel: "nope"})
	wantCode(t, "GetRecoveryInfo of a bad name", err, codes.InvalidArgument)
	_, err = dc.GetRecoveryInfo(ctx, &coordpb.GetRecoveryInfoRequest{Vchannel: vocab.VChannelName("dml_0", 999, 0)})
	wantCode(t, "GetRecoveryInfo of an unknown vchannel", err, codes.NotFound)
	_, err = dc.GetSegmentInfo(ctx, &coordpb.GetSegmentInfoRequest{})
	wantCode(t, "GetSegmentInfo without ids", err, codes.InvalidArgument)
	_, err = dc.GetSegmentInfo(ctx, &coordpb.GetSegmentInfoRequest{SegmentIds: []int64{12345}})
	wantCode(t, "GetSegmentInfo of an unknown segment", err, codes.NotFound)
	_, err = dc.ListSegments(ctx, &coordpb.ListSegmentsRequest{State: "Frozen"})
	wantCode(t, "ListSegments with a bad state", err, codes.InvalidArgument)
	_, err = dc.ListChannelCheckpoints(ctx, &coordpb.ListChannelCheckpointsRequest{CollectionId: -1})
	wantCode(t, "ListChannelCheckpoints with a negative collection", err, codes.InvalidArgument)
	stream, err := dc.WatchFlushTasks(ctx, &coordpb.WatchFlushTasksRequest{NodeId: 1, Epoch: 99})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, "WatchFlushTasks with a wrong epoch", err, codes.FailedPrecondition)
	if after := tn.node.State().AppliedIndex(); after != before {
		t.Fatalf("bad input moved the applied index from %d to %d", before, after)
	}
}

// TestDataFlushEndToEnd drives one flush through the API: assign, flush
// (seal), time ticks past the seal and the expiry, the flush task on the
// node's stream, the binlog save, checkpoints, and the flush state.
func TestDataFlushEndToEnd(t *testing.T) {
	tn, dc := startDataNode(t)
	ctx := callCtx(t)
	as, err := dc.AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: 1, Requests: []*coordpb.SegmentIDRequest{
		{CollectionId: dataColl, PartitionId: 1, Vchannel: dv0, PchannelTerm: 2, Rows: 10, Bytes: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	a := as.Assignments[0]
	if a.SegmentId <= 0 || a.ExpireTs == 0 {
		t.Fatalf("assignment %v", a)
	}
	stream, err := dc.WatchFlushTasks(ctx, &coordpb.WatchFlushTasksRequest{NodeId: 1, Epoch: nodeEpoch(t, tn, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := stream.Recv(); err != nil || len(first.Tasks) != 0 {
		t.Fatalf("first flush-task set %v (%v), want empty", first, err)
	}
	fr, err := dc.Flush(ctx, &coordpb.FlushRequest{CollectionId: dataColl})
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.SealedSegmentIds) != 1 || fr.SealedSegmentIds[0] != a.SegmentId || fr.FlushTs == 0 {
		t.Fatalf("flush response %v", fr)
	}
	fs, err := dc.GetFlushState(ctx, &coordpb.GetFlushStateRequest{SegmentIds: fr.SealedSegmentIds, FlushTs: fr.FlushTs, CollectionId: dataColl})
	if err != nil || fs.Flushed || len(fs.Behind) != 3 {
		t.Fatalf("flush state right after the flush: %v %v", fs, err)
	}
	// The flusher reports time ticks past the seal and the allocation.
	tick := max(fr.FlushTs, a.ExpireTs) + 1
	testutil.EventuallyWithin(t, readyTimeout, "the segment to become Flushing", func() bool {
		_, err := dc.ReportTimeTicks(ctx, &coordpb.ReportTimeTicksRequest{NodeId: 1, Ticks: []*coordpb.ChannelTimeTick{{Vchannel: dv0, PchannelTerm: 2, TimeTick: tick}}})
		if err != nil {
			t.Fatal(err)
		}
		g, _ := tn.node.State().Segment(a.SegmentId)
		return g.State == logpb.SegmentState_SEGMENT_FLUSHING
	})
	task, err := stream.Recv()
	if err != nil || len(task.Tasks) != 1 || task.Tasks[0].SegmentId != a.SegmentId || task.Tasks[0].PchannelTerm != 2 {
		t.Fatalf("flush tasks %v (%v)", task, err)
	}
	// A stale owner (old term) cannot save; the owner can.
	save := &coordpb.SaveBinlogPathsRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 1, SegmentId: a.SegmentId, CollectionId: dataColl,
		PartitionId: 1, Flushed: true, FieldBinlogs: []*coordpb.FieldBinlog{{FieldId: 100, Binlogs: []*coordpb.Binlog{{LogId: 7, EntriesNum: 10}}}},
		Checkpoints: []*coordpb.SegmentCheckpoint{{SegmentId: a.SegmentId, Position: &coordpb.Position{Term: 2, Offset: 9, Timestamp: tick}, NumOfRows: 10}}}
	before := tn.node.State().AppliedIndex()
	_, err = dc.SaveBinlogPaths(ctx, save)
	wantCode(t, "save from an old term", err, codes.Aborted)
	if g, _ := tn.node.State().Segment(a.SegmentId); g.State != logpb.SegmentState_SEGMENT_FLUSHING || len(g.Binlogs) != 0 {
		t.Fatalf("a refused save changed the segment: %+v (applied %d → %d)", g, before, tn.node.State().AppliedIndex())
	}
	save.PchannelTerm = 2
	if r, err := dc.SaveBinlogPaths(ctx, save); err != nil || r.Stale || r.State != "Flushed" {
		t.Fatalf("save: %v %v", r, err)
	}
	if r, err := dc.SaveBinlogPaths(ctx, save); err != nil || !r.Stale {
		t.Fatalf("repeated save must be stale: %v %v", r, err)
	}
	if empty, err := stream.Recv(); err != nil || len(empty.Tasks) != 0 {
		t.Fatalf("flush tasks after the save %v (%v)", empty, err)
	}
	cp := func(node uint64, v string, ts uint64) *coordpb.UpdateChannelCheckpointsRequest {
		return &coordpb.UpdateChannelCheckpointsRequest{NodeId: node, Checkpoints: []*coordpb.ChannelCheckpoint{
			{Vchannel: v, PchannelTerm: 2, Position: &coordpb.Position{Term: 2, Offset: 10, Timestamp: ts}}}}
	}
	if r, err := dc.UpdateChannelCheckpoints(ctx, cp(1, dv0, tick)); err != nil || r.Accepted != 1 {
		t.Fatalf("checkpoint: %v %v", r, err)
	}
	if r, err := dc.UpdateChannelCheckpoints(ctx, cp(1, dv1, tick)); err != nil || r.Accepted != 0 || len(r.Refused) != 1 {
		t.Fatalf("checkpoint from a non-owner must be refused: %v %v", r, err)
	}
	// A checkpoint that is not newer is refused on the leader: no log entry.
	idx := tn.node.State().AppliedIndex()
	if r, err := dc.UpdateChannelCheckpoints(ctx, cp(1, dv0, tick)); err != nil || r.Accepted != 0 ||
		len(r.Refused) != 1 || r.Refused[0] != dv0+": not newer than the stored checkpoint" {
		t.Fatalf("repeated checkpoint: %v %v", r, err)
	}
	if got := tn.node.State().AppliedIndex(); got != idx {
		t.Fatalf("a checkpoint refused on the leader still reached the log (%d → %d)", idx, got)
	}
	fs, _ = dc.GetFlushState(ctx, &coordpb.GetFlushStateRequest{SegmentIds: fr.SealedSegmentIds, FlushTs: fr.FlushTs, CollectionId: dataColl})
	if fs.Flushed || len(fs.Behind) != 1 || fs.Behind[0].Vchannel != dv1 || fs.Behind[0].State != "none" {
		t.Fatalf("one vchannel behind: %v", fs)
	}
	if _, err := dc.UpdateChannelCheckpoints(ctx, cp(2, dv1, fr.FlushTs)); err != nil {
		t.Fatal(err)
	}
	if fs, _ = dc.GetFlushState(ctx, &coordpb.GetFlushStateRequest{SegmentIds: fr.SealedSegmentIds, FlushTs: fr.FlushTs, CollectionId: dataColl}); !fs.Flushed {
		t.Fatalf("everything flushed: %v", fs)
	}
	info, err := dc.GetSegmentInfo(ctx, &coordpb.GetSegmentInfoRequest{SegmentIds: []int64{a.SegmentId}})
	if err != nil || len(info.Segments) != 1 || info.Segments[0].NumOfRows != 10 || len(info.ChannelCheckpoints) != 1 {
		t.Fatalf("segment info %v %v", info, err)
	}
	wantPath := commands.InsertLogPath(dataColl, 1, a.SegmentId, 100, 7)
	if p := info.Segments[0].BinlogPaths; len(p) != 1 || p[0] != wantPath || info.Segments[0].FieldBinlogs[0].Binlogs[0].Path != wantPath {
		t.Fatalf("binlog paths %v, want [%s]", p, wantPath)
	}
	ri, err := dc.GetRecoveryInfo(ctx, &coordpb.GetRecoveryInfoRequest{Vchannel: dv0})
	if err != nil || len(ri.Flushed) != 1 || ri.SeekPosition.GetTimestamp() != tick || ri.Dropped {
		t.Fatalf("recovery info %v %v", ri, err)
	}
	ls, err := dc.ListSegments(ctx, &coordpb.ListSegmentsRequest{CollectionId: dataColl, State: "Flushed"})
	if err != nil || len(ls.Segments) != 1 || ls.NextAfterSegmentId != 0 {
		t.Fatalf("list segments %v %v", ls, err)
	}
	cps, err := dc.ListChannelCheckpoints(ctx, &coordpb.ListChannelCheckpointsRequest{CollectionId: dataColl})
	if err != nil || len(cps.Checkpoints) != 2 {
		t.Fatalf("checkpoints %v %v", cps, err)
	}
}

func nodeEpoch(t *testing.T, tn *testNode, id uint64) uint64 {
	t.Helper()
	n, ok := tn.node.State().StreamingNode(id)
	if !ok {
		t.Fatalf("node %d missing", id)
	}
	return n.Epoch
}
