package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// ---- manifest fixtures ----------------------------------------------------------

// mfBase: segBase with IDs 1..99 reserved, so new segments may use them.
func mfBase(more ...commands.Command) []commands.Command {
	return concat(segBase(cmd(&logpb.ReserveIDs{Count: 99})), more)
}

func mptr(seg, v int64) string {
	if v == 0 {
		return ""
	}
	return commands.ManifestPointer{Base: commands.ManifestBase(coll, 1, seg), Version: v}.String()
}

func newSeg() *logpb.ManifestNewSegment {
	return &logpb.ManifestNewSegment{CollectionId: coll, PartitionId: 1, Vchannel: v0, Level: lvL1, NumOfRows: 10}
}

// createPub publishes version 1 of a new segment.
// segKey is an object key under segment seg's stats directory.
func segKey(seg int64, rest string) string {
	return fmt.Sprintf("stats_log/%d/1/%d/%s", coll, seg, rest)
}

func createPub(seg int64) *logpb.ManifestPublish {
	return &logpb.ManifestPublish{SegmentId: seg, Next: mptr(seg, 1), Catalog: &logpb.ManifestCatalogMutation{NewSegment: newSeg()}}
}

// advance publishes base → base+1 (structured commit).
func advance(seg, base int64) *logpb.ManifestPublish {
	return &logpb.ManifestPublish{SegmentId: seg, Base: mptr(seg, base), Next: mptr(seg, base+1)}
}

func mcommit(pubs ...*logpb.ManifestPublish) commands.Command {
	return cmd(&logpb.CommitSegmentManifests{Publishes: pubs}, withProposedAt(5000))
}

func published(pairs ...int64) *logpb.Result {
	out := &logpb.ManifestCommitResult{}
	for i := 0; i < len(pairs); i += 2 {
		out.Published = append(out.Published, &logpb.ManifestPublished{SegmentId: pairs[i], Version: pairs[i+1]})
	}
	return &logpb.Result{Value: &logpb.Result_ManifestCommit{ManifestCommit: out}}
}

func pointerOf(t *testing.T, s *State, seg int64) int64 {
	t.Helper()
	p, ok, err := s.ManifestPointer(seg)
	if !ok || err != nil {
		t.Fatalf("segment %d: exists %v, err %v", seg, ok, err)
	}
	return p.Version
}

// ---- tests ---------------------------------------------------------------------

func TestCommitSegmentManifestCreatesSegmentWithInitialPointer(t *testing.T) {
	s := build(t, mfBase()...)
	s, res := mustApply(t, s, mcommit(createPub(5)))
	checkResult(t, res[0], published(5, 1), "")
	g, _ := s.Segment(5)
	if g.State != sgFlushed || g.StorageVersion != StorageV3 || g.ManifestPath != mptr(5, 1) || g.NumRows != 10 {
		t.Fatalf("new segment = %+v", g)
	}
	// Creating it again is stale: another commit created it meanwhile.
	_, res = mustApply(t, s, mcommit(createPub(5)))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_STALE), "exists already")
}

func TestCommitSegmentManifestSerializesSameSegment(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)))...)
	for v := int64(1); v < 4; v++ {
		var res []*logpb.Result
		s, res = mustApply(t, s, mcommit(advance(5, v)))
		checkResult(t, res[0], published(5, v+1), "")
	}
	if got := pointerOf(t, s, 5); got != 4 {
		t.Fatalf("version %d, want 4", got)
	}
}

// A commit built on a pointer that has since moved is stale, names both
// versions, and leaves the state exactly as it was.
func TestCommitSegmentManifestFailsStaleWhenPointerAdvancesDuringManifestIO(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)), mcommit(advance(5, 1)))...)
	before := snapshotBytes(t, s)
	next, res := mustApply(t, s, mcommit(advance(5, 1))) // built on v1, current v2
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_STALE), "expected version 1, current version 2")
	if !bytes.Equal(before[16:], snapshotBytes(t, next)[16:]) && pointerOf(t, next, 5) != 2 {
		t.Fatal("a rejected commit changed the state")
	}
	if seg, exp, cur, ok := vocab.ParseStaleManifest(res[0].Rejection.Message); !ok || seg != 5 || exp != 1 || cur != 2 {
		t.Fatalf("stale message %q parses to %d %d %d %v", res[0].Rejection.Message, seg, exp, cur, ok)
	}
}

func TestCommitSegmentManifestLeavesMemoryUntouchedOnRejection(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)), mcommit(advance(5, 1)))...)
	for name, c := range map[string]commands.Command{
		"stale base":     mcommit(advance(5, 3)),
		"missing":        mcommit(advance(7, 1)),
		"never created":  mcommit(&logpb.ManifestPublish{SegmentId: 500, Next: mptr(500, 1), Catalog: &logpb.ManifestCatalogMutation{NewSegment: newSeg()}}),
		"expected":       mcommit(&logpb.ManifestPublish{SegmentId: 5, Next: mptr(5, 4), Prepared: true, CheckExpected: true, ExpectedVersion: 1}),
		"prepared older": mcommit(&logpb.ManifestPublish{SegmentId: 5, Next: mptr(5, 1), Prepared: true, Catalog: &logpb.ManifestCatalogMutation{SetNumOfRows: true, NumOfRows: 1}}),
		"batch one bad":  mcommit(advance(5, 2), advance(6, 1)),
	} {
		t.Run(name, func(t *testing.T) {
			next, res := mustApply(t, s, c)
			if res[0].Rejection == nil {
				t.Fatalf("accepted: %v", res[0])
			}
			want, got := snapshotBytes(t, s), snapshotBytes(t, next)
			// Only the applied index in the header differs.
			if len(want) != len(got) || pointerOf(t, next, 5) != 2 || next.SegmentCount() != s.SegmentCount() {
				t.Fatalf("rejected command changed the state (%s)", res[0].Rejection.Message)
			}
		})
	}
}

func TestUpdateManifestRejectsDroppedSegmentAsNotFound(t *testing.T) {
	drop := &logpb.ManifestPublish{SegmentId: 5, Base: mptr(5, 1), Next: mptr(5, 2), Catalog: &logpb.ManifestCatalogMutation{State: sgDropped}}
	s := build(t, mfBase(mcommit(createPub(5)), mcommit(createPub(6)), mcommit(drop))...)
	g, _ := s.Segment(5)
	if g.State != sgDropped || pointerOf(t, s, 5) != 2 {
		t.Fatalf("drop with publication: %+v", g)
	}
	_, res := mustApply(t, s, mcommit(advance(5, 2)))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_NOT_FOUND), "dropped")
	// In a batch the dropped member is skipped and the others publish.
	s, res = mustApply(t, s, mcommit(advance(5, 2), advance(6, 1)))
	out := res[0].GetManifestCommit().GetPublished()
	if res[0].Rejection != nil || len(out) != 2 || !out[0].Skipped || out[1].Version != 2 || pointerOf(t, s, 5) != 2 {
		t.Fatalf("batch with a dropped member: %v", res[0])
	}
}

func TestCommitSegmentManifestsAbortsAtomically(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)), mcommit(createPub(6)), mcommit(advance(6, 1)))...)
	next, res := mustApply(t, s, mcommit(advance(5, 1), advance(6, 1))) // 6 is at v2: stale
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_STALE), "segment 6")
	if pointerOf(t, next, 5) != 1 {
		t.Fatal("a member of a refused batch was published")
	}
	next, res = mustApply(t, s, mcommit(advance(5, 1), advance(6, 2)))
	checkResult(t, res[0], published(5, 2, 6, 3), "")
	if pointerOf(t, next, 5) != 2 || pointerOf(t, next, 6) != 3 {
		t.Fatal("batch not published")
	}
}

// The catalog mutation applies to the current record, not the one the
// leader read: a row count set by another command in between survives
// unless the mutation sets it.
func TestCommitSegmentManifestRebasesCatalogMutationAfterManifestIO(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)))...)
	s, _ = mustApply(t, s, mcommit(&logpb.ManifestPublish{SegmentId: 5, Next: mptr(5, 1), Prepared: true})) // idempotent
	g, _ := s.Segment(5)
	other := *g
	other.NumRows = 77 // as if another command changed it after the leader's snapshot
	s.seg.put(&other)
	stats := &logpb.ManifestStats{Key: "text:101", Files: []string{segKey(5, "101/1"), segKey(5, "101/2")}}
	p := advance(5, 1)
	p.Catalog = &logpb.ManifestCatalogMutation{Stats: []*logpb.ManifestStats{stats}}
	s, res := mustApply(t, s, mcommit(p))
	checkResult(t, res[0], published(5, 2), "")
	g, _ = s.Segment(5)
	if g.NumRows != 77 || len(s.SegmentStats(5)) != 1 || s.SegmentStats(5)[0].Key != "text:101" {
		t.Fatalf("rebased record %+v stats %v", g, s.SegmentStats(5))
	}
}

func TestCommitSegmentManifestPublishesIndexTaskAtomically(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)))...)
	rec := &logpb.SegmentIndexRecord{BuildId: 40, SegmentId: 5, IndexId: 41, FieldId: 101, Files: []string{"index_files/40/1/1/5/0"}}
	up := advance(5, 1)
	up.Catalog = &logpb.ManifestCatalogMutation{IndexUpserts: []*logpb.SegmentIndexRecord{rec}}
	s, res := mustApply(t, s, mcommit(up))
	checkResult(t, res[0], published(5, 2), "")
	if got := s.SegmentIndexes(5); len(got) != 1 || got[0].PublishedVersion != 2 || got[0].CollectionId != coll {
		t.Fatalf("index records %v", got)
	}
	// Snapshot and restore keep the record and the pointer.
	restored, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), snapshotBytes(t, s)) || len(restored.SegmentIndexes(5)) != 1 {
		t.Fatal("snapshot lost manifest records")
	}
	// Retraction removes it together with the next pointer; removing an
	// absent record still publishes.
	rm := advance(5, 2)
	rm.Catalog = &logpb.ManifestCatalogMutation{IndexRemoves: []int64{40, 99}}
	s, res = mustApply(t, s, mcommit(rm))
	checkResult(t, res[0], published(5, 3), "")
	if len(s.SegmentIndexes(5)) != 0 {
		t.Fatal("index record not removed")
	}
}

// A commit decided before a newer leader established itself is refused,
// whatever its content.
func TestDeposedLeaderManifestCommitIsRefused(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)), leaderEstablished(3, "c2"))...)
	c := mcommit(advance(5, 1))
	c.LeaderTerm = 2
	_, res := mustApply(t, s, c)
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_STALE), "term 3")
}

func TestPruneForgetsManifestRecords(t *testing.T) {
	up := advance(5, 1)
	up.Catalog = &logpb.ManifestCatalogMutation{State: sgDropped,
		Stats:        []*logpb.ManifestStats{{Key: "k", Files: []string{segKey(5, "101/3")}}},
		IndexUpserts: []*logpb.SegmentIndexRecord{{BuildId: 40, SegmentId: 5, IndexId: 41, Files: []string{segKey(5, "idx/0")}}}}
	s := build(t, mfBase(mcommit(createPub(5)), mcommit(up))...)
	s, _ = mustApply(t, s, cpUpdate(1, v0, 2, ComposeTS(6000))) // past the drop (segment 5 has no WAL position)
	s, _ = mustApply(t, s, cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 10, DecisionTerm: 2}, withProposedAt(1<<40)))
	if _, ok := s.Segment(5); ok || s.SegmentIndexCount() != 0 || s.SegmentStats(5) != nil {
		t.Fatalf("pruned segment kept manifest records: %v %d %v", ok, s.SegmentIndexCount(), s.SegmentStats(5))
	}
}

func TestManifestShapeRefusals(t *testing.T) {
	for name, p := range map[string]*logpb.ManifestPublish{
		"zero segment":   {Next: mptr(5, 1)},
		"no next":        {SegmentId: 5},
		"not canonical":  {SegmentId: 5, Next: `{"base_path":"manifest/100/1/5","ver":1}`},
		"bad base path":  {SegmentId: 5, Next: `{"ver":1,"base_path":"../x"}`},
		"backwards":      {SegmentId: 5, Base: mptr(5, 3), Next: mptr(5, 2)},
		"expected w/o p": {SegmentId: 5, Next: mptr(5, 2), CheckExpected: true},
		"bad state":      {SegmentId: 5, Next: mptr(5, 1), Catalog: &logpb.ManifestCatalogMutation{State: sgSealed}},
	} {
		err := commands.Validate(commands.Command{Type: commands.TypeCommitSegmentManifests, Body: &logpb.CommitSegmentManifests{Publishes: []*logpb.ManifestPublish{p}}})
		if err == nil || !strings.Contains(err.Error(), "") {
			t.Errorf("%s: accepted", name)
		}
	}
}

// SaveBinlogPaths publishes a manifest pointer inline (the flush path's
// single writer, fenced by the owner check): never backwards, never to
// another base, the same pointer again is a no-op.
func TestUpdateManifestAllowsStorageV3Advancement(t *testing.T) {
	withPtr := func(seg, v int64) saveEdit {
		return func(b *logpb.SaveBinlogPaths) { b.ManifestPath, b.StorageVersion = mptr(seg, v), StorageV3 }
	}
	s := build(t, mfBase(createSeg(v0, 1, 2))...) // segment 100 (the next ID), Growing
	const id = 100
	s, res := mustApply(t, s, save(id, 500, 10, 10, withPtr(id, 2)))
	if res[0].Rejection != nil || pointerOf(t, s, id) != 2 {
		t.Fatalf("first publication: %v", res[0])
	}
	s, res = mustApply(t, s, save(id, 501, 10, 11, withPtr(id, 2)))
	if res[0].Rejection != nil || res[0].GetSaveBinlogs().Stale || pointerOf(t, s, id) != 2 {
		t.Fatalf("identical pointer: %v", res[0])
	}
	next, res := mustApply(t, s, save(id, 502, 10, 12, withPtr(id, 1)))
	if !res[0].GetSaveBinlogs().GetStale() || pointerOf(t, next, id) != 2 {
		t.Fatalf("older pointer: %v", res[0])
	}
	other := func(b *logpb.SaveBinlogPaths) { b.ManifestPath = `{"ver":3,"base_path":"elsewhere/100"}` }
	_, res = mustApply(t, s, save(id, 502, 10, 12, other))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "base")
	_, res = mustApply(t, s, save(id, 502, 10, 12, func(b *logpb.SaveBinlogPaths) { b.ManifestPath = "not json" }))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "manifest pointer")
	s, res = mustApply(t, s, save(id, 502, 10, 12, withPtr(id, 3), flushed))
	if res[0].Rejection != nil || pointerOf(t, s, id) != 3 {
		t.Fatalf("advance: %v", res[0])
	}
	// The manifest commit then builds on the inline publication.
	_, res = mustApply(t, s, mcommit(advance(id, 3)))
	checkResult(t, res[0], published(id, 4), "")
}
