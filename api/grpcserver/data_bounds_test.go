package grpcserver

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
)

// TestDataPositionBounds: through the API, even from the real owner, a
// position beyond the PChannel's term or the TSO, a tick of 2^64-1 and a
// save whose row or size sums overflow int64 are refused with a clear
// answer (InvalidArgument, or a listed refusal) and change nothing
// (docs/semantics.md#position-bounds).
func TestDataPositionBounds(t *testing.T) {
	tn, dc := startDataNode(t)
	ctx := callCtx(t)
	as, err := dc.AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: 1, Requests: []*coordpb.SegmentIDRequest{
		{CollectionId: dataColl, PartitionId: 1, Vchannel: dv0, PchannelTerm: 2, Rows: 1, Bytes: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	seg := as.Assignments[0].SegmentId
	before := tn.node.State()
	beyondTSO := uint64(before.TSOLimitPhysicalMs()+60_000) << 18

	cps, err := dc.UpdateChannelCheckpoints(ctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: 1, Checkpoints: []*coordpb.ChannelCheckpoint{
		{Vchannel: dv0, PchannelTerm: 2, Position: &coordpb.Position{Term: 99, Offset: 1, Timestamp: 10}},
		{Vchannel: dv1, PchannelTerm: 2, Position: &coordpb.Position{Term: 2, Offset: 1099511627776, Timestamp: beyondTSO}}}})
	// dv1 belongs to node 2: node 1's entry for it is refused as a non-owner's.
	if err != nil || cps.Accepted != 0 || len(cps.Refused) != 2 || !strings.Contains(cps.Refused[0], "message term 99 is beyond") {
		t.Fatalf("checkpoints: %v %v", cps, err)
	}
	cps, err = dc.UpdateChannelCheckpoints(ctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: 2, Checkpoints: []*coordpb.ChannelCheckpoint{
		{Vchannel: dv1, PchannelTerm: 2, Position: &coordpb.Position{Term: 2, Offset: 1099511627776, Timestamp: beyondTSO}}}})
	if err != nil || cps.Accepted != 0 || len(cps.Refused) != 1 || !strings.Contains(cps.Refused[0], "beyond the committed TSO limit") {
		t.Fatalf("checkpoint beyond the TSO: %v %v", cps, err)
	}

	ticks, err := dc.ReportTimeTicks(ctx, &coordpb.ReportTimeTicksRequest{NodeId: 1, Ticks: []*coordpb.ChannelTimeTick{
		{Vchannel: dv0, PchannelTerm: 2, TimeTick: math.MaxUint64}}})
	if err != nil || ticks.Accepted != 0 || len(ticks.Refused) != 1 || !strings.Contains(ticks.Refused[0], "dropped sentinel") {
		t.Fatalf("tick 2^64-1: %v %v", ticks, err)
	}

	save := func(edit func(*coordpb.SaveBinlogPathsRequest)) error {
		r := &coordpb.SaveBinlogPathsRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, SegmentId: seg, CollectionId: dataColl, PartitionId: 1,
			FieldBinlogs: []*coordpb.FieldBinlog{{FieldId: 100, Binlogs: []*coordpb.Binlog{{LogId: 7, EntriesNum: 10, TimestampFrom: 1, TimestampTo: 2}}}},
			Checkpoints:  []*coordpb.SegmentCheckpoint{{SegmentId: seg, Position: &coordpb.Position{Term: 2, Offset: 3, Timestamp: 3}, NumOfRows: 10}}}
		edit(r)
		_, err := dc.SaveBinlogPaths(ctx, r)
		return err
	}
	err = save(func(r *coordpb.SaveBinlogPathsRequest) {
		r.StartPositions = []*coordpb.SegmentStartPosition{{SegmentId: seg, Position: &coordpb.Position{Term: 99, Offset: 0, Timestamp: 1}}}
	})
	wantCode(t, "start position at term 99", err, codes.InvalidArgument)
	err = save(func(r *coordpb.SaveBinlogPathsRequest) { r.Checkpoints[0].Position.Timestamp = beyondTSO })
	wantCode(t, "DML position beyond the TSO", err, codes.InvalidArgument)
	// The probe's D4 reproduction.
	err = save(func(r *coordpb.SaveBinlogPathsRequest) {
		r.FieldBinlogs = []*coordpb.FieldBinlog{
			{FieldId: 100, Binlogs: []*coordpb.Binlog{{LogId: 1, EntriesNum: math.MaxInt64, MemorySize: math.MaxInt64}}},
			{FieldId: 101, Binlogs: []*coordpb.Binlog{{LogId: 2, EntriesNum: math.MaxInt64, MemorySize: math.MaxInt64}}}}
	})
	wantCode(t, "sizes that overflow", err, codes.InvalidArgument)

	after := tn.node.State()
	if _, ok := after.ChannelCheckpoint(dv0); ok {
		t.Fatal("a refused checkpoint was stored")
	}
	if _, ok := after.ChannelCheckpoint(dv1); ok {
		t.Fatal("a refused checkpoint was stored")
	}
	if g, _ := after.Segment(seg); g.State != logpb.SegmentState_SEGMENT_GROWING || len(g.Binlogs) != 0 || !g.Start.IsZero() || !g.DML.IsZero() || g.NumRows != 0 {
		t.Fatalf("a refused save changed segment %d: %+v", seg, g)
	}
	if _, ok := tn.set.Data.TimeTicks()[dv0]; ok {
		t.Fatal("the refused tick was recorded")
	}
}
