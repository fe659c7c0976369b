package grpcserver

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// TestImportSegmentThroughTheAPI: create an Importing segment, finish it
// with its pointer, retry the finish (no-op), then refuse an older pointer,
// a non-owner and bad input without any change.
func TestImportSegmentThroughTheAPI(t *testing.T) {
	tn, dc := startDataNode(t)
	ctx := callCtx(t)
	before := tn.node.State().AppliedIndex()
	_, err := dc.CreateImportSegment(ctx, &coordpb.CreateImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl, Level: "L0"})
	wantCode(t, "CreateImportSegment at L0", err, codes.InvalidArgument)
	_, err = dc.CreateImportSegment(ctx, &coordpb.CreateImportSegmentRequest{NodeId: 1, Vchannel: "nope", PchannelTerm: 2, CollectionId: dataColl})
	wantCode(t, "CreateImportSegment on a bad vchannel", err, codes.InvalidArgument)
	_, err = dc.FinishImportSegment(ctx, &coordpb.FinishImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl, SegmentId: 5})
	wantCode(t, "FinishImportSegment without a pointer", err, codes.InvalidArgument)
	_, err = dc.FinishImportSegment(ctx, &coordpb.FinishImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl,
		SegmentId: 5, ManifestPath: `{"ver":1}`})
	wantCode(t, "FinishImportSegment with half a pointer", err, codes.InvalidArgument)
	if after := tn.node.State().AppliedIndex(); after != before {
		t.Fatalf("bad input moved the applied index from %d to %d", before, after)
	}

	_, err = dc.CreateImportSegment(ctx, &coordpb.CreateImportSegmentRequest{NodeId: 2, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl})
	wantCode(t, "CreateImportSegment from a non-owner", err, codes.Aborted)
	if n := tn.node.State().SegmentCount(); n != 0 {
		t.Fatalf("a refused create left %d segments", n)
	}
	cr, err := dc.CreateImportSegment(ctx, &coordpb.CreateImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl, PartitionId: 1, RequestId: "imp-1"})
	if err != nil {
		t.Fatal(err)
	}
	if cr.ManifestBase != commands.ManifestBase(dataColl, 1, cr.SegmentId) {
		t.Fatalf("create answered %v", cr)
	}
	again, err := dc.CreateImportSegment(ctx, &coordpb.CreateImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl, PartitionId: 1, RequestId: "imp-1"})
	if err != nil || again.SegmentId != cr.SegmentId {
		t.Fatalf("a retried create answered %v (%v), want segment %d", again, err, cr.SegmentId)
	}
	if g, ok := tn.node.State().Segment(cr.SegmentId); !ok || g.State != logpb.SegmentState_SEGMENT_IMPORTING {
		t.Fatalf("segment after create: %+v", g)
	}
	ptr := func(v int64) string { return commands.ManifestPointer{Base: cr.ManifestBase, Version: v}.String() }
	finish := &coordpb.FinishImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl,
		SegmentId: cr.SegmentId, ManifestPath: ptr(2), NumOfRows: 100}
	_, err = dc.FinishImportSegment(ctx, &coordpb.FinishImportSegmentRequest{NodeId: 2, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl,
		SegmentId: cr.SegmentId, ManifestPath: ptr(2), NumOfRows: 100})
	wantCode(t, "FinishImportSegment from a non-owner", err, codes.Aborted)
	fr, err := dc.FinishImportSegment(ctx, finish)
	if err != nil || fr.Version != 2 || fr.State != "Flushed" || fr.Unchanged {
		t.Fatalf("finish answered %v (%v)", fr, err)
	}
	fr, err = dc.FinishImportSegment(ctx, finish)
	if err != nil || fr.Version != 2 || fr.State != "Flushed" || !fr.Unchanged {
		t.Fatalf("a repeated finish answered %v (%v), want an unchanged success", fr, err)
	}
	applied := tn.node.State().AppliedIndex()
	older := &coordpb.FinishImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2, CollectionId: dataColl,
		SegmentId: cr.SegmentId, ManifestPath: ptr(1), NumOfRows: 100}
	_, err = dc.FinishImportSegment(ctx, older)
	wantCode(t, "FinishImportSegment with an older pointer", err, codes.Aborted)
	g, _ := tn.node.State().Segment(cr.SegmentId)
	if g.State != logpb.SegmentState_SEGMENT_FLUSHED || g.ManifestPath != ptr(2) || g.NumRows != 100 {
		t.Fatalf("segment after the refused finish: %+v (applied %d → %d)", g, applied, tn.node.State().AppliedIndex())
	}
}
