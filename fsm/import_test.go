package fsm

import (
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

const sgImporting = logpb.SegmentState_SEGMENT_IMPORTING

func createImport(vch string, node uint64, term int64) commands.Command {
	return cmd(&logpb.CreateImportSegment{CollectionId: coll, PartitionId: 1, Vchannel: vch, NodeId: node,
		PchannelTerm: term, Level: lvL1}, withProposedAt(1000))
}

// finishImport finishes segment seg on v0 as node 1 at term 2 unless edited.
func finishImport(seg int64, pointer string, rows int64, edits ...func(*logpb.FinishImportSegment)) commands.Command {
	b := &logpb.FinishImportSegment{SegmentId: seg, CollectionId: coll, Vchannel: v0, NodeId: 1, PchannelTerm: 2,
		ManifestPath: pointer, NumOfRows: rows}
	for _, e := range edits {
		e(b)
	}
	return cmd(b, withProposedAt(3000))
}

func finished(version int64, st logpb.SegmentState, unchanged bool) *logpb.Result {
	return importResult(version, st, unchanged)
}

// importBase: segBase plus Importing segment 1 on v0 (node 1, term 2).
func importBase(more ...commands.Command) []commands.Command {
	return segBase(append([]commands.Command{createImport(v0, 1, 2)}, more...)...)
}

func TestCreateImportSegment(t *testing.T) {
	s := build(t, segBase()...)
	next, res := mustApply(t, s, createImport(v0, 1, 2))
	checkResult(t, res[0], segmentIDs([]int64{1}), "")
	g, _ := next.Segment(1)
	if g.State != sgImporting || g.Level != lvL1 || g.StorageVersion != StorageV3 || g.ManifestPath != "" || g.NumRows != 0 {
		t.Fatalf("import segment = %+v", g)
	}
	for name, c := range map[string]struct {
		cmd  commands.Command
		code logpb.RejectCode
	}{
		"stale term":       {createImport(v0, 1, 1), logpb.RejectCode_REJECT_STALE},
		"other node":       {createImport(v0, 2, 2), logpb.RejectCode_REJECT_STALE},
		"unknown vchannel": {createImport(vocab.VChannelName(p0, coll, 7), 1, 2), logpb.RejectCode_REJECT_NOT_FOUND},
	} {
		t.Run(name, func(t *testing.T) {
			next, res := mustApply(t, s, c.cmd)
			checkResult(t, res[0], rejected(c.code), "")
			sameExceptApplied(t, s, next)
		})
	}
}

func TestFinishImportSegment(t *testing.T) {
	other := commands.ManifestPointer{Base: "manifest/elsewhere/1", Version: 5}.String()
	withPointer := func(v int64) commands.Command { // an Importing segment 1 with pointer v (prepared publish)
		return mcommit(&logpb.ManifestPublish{SegmentId: 1, Next: mptr(1, v), Prepared: true})
	}
	cases := []struct {
		name  string
		setup []commands.Command
		cmd   commands.Command
		want  *logpb.Result
		msg   string
		state logpb.SegmentState // after an accepted command
	}{
		{name: "owner publishes: Flushed with rows and pointer", setup: importBase(), cmd: finishImport(1, mptr(1, 1), 10),
			want: finished(1, sgFlushed, false), state: sgFlushed},
		{name: "no rows: Dropped", setup: importBase(), cmd: finishImport(1, mptr(1, 1), 0),
			want: finished(1, sgDropped, false), state: sgDropped},
		{name: "higher version than the current pointer", setup: importBase(withPointer(2)), cmd: finishImport(1, mptr(1, 3), 10),
			want: finished(3, sgFlushed, false), state: sgFlushed},
		{name: "stale pchannel term", setup: importBase(), cmd: finishImport(1, mptr(1, 1), 10, func(b *logpb.FinishImportSegment) { b.PchannelTerm = 1 }),
			want: rejected(logpb.RejectCode_REJECT_STALE), msg: "term"},
		{name: "other node", setup: importBase(), cmd: finishImport(1, mptr(1, 1), 10, func(b *logpb.FinishImportSegment) { b.NodeId = 2 }),
			want: rejected(logpb.RejectCode_REJECT_STALE)},
		{name: "equal version is stale on an Importing segment", setup: importBase(withPointer(2)), cmd: finishImport(1, mptr(1, 2), 10),
			want: rejected(logpb.RejectCode_REJECT_STALE), msg: "expected version 2, current version 2"},
		{name: "lower version is stale", setup: importBase(withPointer(2)), cmd: finishImport(1, mptr(1, 1), 10),
			want: rejected(logpb.RejectCode_REJECT_STALE), msg: "expected version 1, current version 2"},
		{name: "other base is invalid", setup: importBase(withPointer(2)), cmd: finishImport(1, other, 10),
			want: rejected(logpb.RejectCode_REJECT_INVALID), msg: "base"},
		{name: "identical pointer after the finish: acknowledged no-op", setup: importBase(finishImport(1, mptr(1, 1), 10)),
			cmd: finishImport(1, mptr(1, 1), 10), want: finished(1, sgFlushed, true)},
		{name: "another pointer after the finish: stale", setup: importBase(finishImport(1, mptr(1, 1), 10)),
			cmd: finishImport(1, mptr(1, 2), 10), want: rejected(logpb.RejectCode_REJECT_STALE), msg: "finished already"},
		{name: "same pointer, other rows after the finish: stale", setup: importBase(finishImport(1, mptr(1, 1), 10)),
			cmd: finishImport(1, mptr(1, 1), 11), want: rejected(logpb.RejectCode_REJECT_STALE)},
		{name: "wrong state (Growing)", setup: segBase(createSeg(v0, 1, 2)), cmd: finishImport(1, mptr(1, 1), 10),
			want: rejected(logpb.RejectCode_REJECT_CONFLICT), msg: "Growing"},
		{name: "dropped segment", setup: importBase(dropV(coll)), cmd: finishImport(1, mptr(1, 1), 10),
			want: rejected(logpb.RejectCode_REJECT_NOT_FOUND), msg: "dropped"},
		{name: "unknown segment", setup: importBase(), cmd: finishImport(9, mptr(9, 1), 10),
			want: rejected(logpb.RejectCode_REJECT_NOT_FOUND)},
		{name: "segment of another vchannel", setup: importBase(), cmd: finishImport(1, mptr(1, 1), 10, func(b *logpb.FinishImportSegment) { b.Vchannel, b.NodeId = v1, 2 }),
			want: rejected(logpb.RejectCode_REJECT_CONFLICT), msg: "belongs to"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := build(t, c.setup...)
			next, res := mustApply(t, s, c.cmd)
			checkResult(t, res[0], c.want, c.msg)
			if c.state == logpb.SegmentState_SEGMENT_UNKNOWN {
				sameExceptApplied(t, s, next) // rejections and no-ops change nothing
				return
			}
			b := c.cmd.Body.(*logpb.FinishImportSegment)
			g, _ := next.Segment(1)
			if g.State != c.state || g.ManifestPath != b.ManifestPath || g.NumRows != b.NumOfRows || g.StorageVersion != StorageV3 {
				t.Fatalf("segment after finish = %+v", g)
			}
		})
	}
}

// A flush cannot publish an Importing segment, and the segment is not
// touched by a flusher's checkpoint of another segment.
func TestSaveBinlogPathsLeavesImportingSegmentsAlone(t *testing.T) {
	s := build(t, importBase(createSeg(v0, 1, 2))...)
	next, res := mustApply(t, s, save(1, 50, 10, 100, func(b *logpb.SaveBinlogPaths) { b.Flushed = true }))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_CONFLICT), "Importing")
	sameExceptApplied(t, s, next)
	next, res = mustApply(t, s, save(2, 51, 10, 100, func(b *logpb.SaveBinlogPaths) {
		b.Checkpoints = append(b.Checkpoints, &logpb.SegmentCheckpointUpdate{SegmentId: 1, Position: wpos(2, 100, 100), NumOfRows: 5})
	}))
	checkResult(t, res[0], saveResult(false, sgGrowing), "")
	if g, _ := next.Segment(1); g.State != sgImporting || !g.DML.IsZero() || g.NumRows != 0 {
		t.Fatalf("importing segment after another segment's save = %+v", g)
	}
}

// Replaying the import path from a snapshot gives the same state as
// applying it directly (the record survives the snapshot codec).
func TestImportSegmentSurvivesSnapshot(t *testing.T) {
	s := build(t, importBase(createImport(v0, 1, 2), finishImport(1, mptr(1, 1), 10))...)
	restored := restore(t, s)
	for _, id := range []int64{1, 2} {
		a, _ := s.Segment(id)
		b, _ := restored.Segment(id)
		if a.State != b.State || a.ManifestPath != b.ManifestPath || a.NumRows != b.NumRows || a.StorageVersion != b.StorageVersion {
			t.Fatalf("segment %d: %+v after a snapshot, %+v before", id, b, a)
		}
	}
}
