package fsm

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// withPointer sets a save's manifest pointer (storage version 3).
func withPointer(p commands.ManifestPointer) saveEdit {
	return func(b *logpb.SaveBinlogPaths) { b.ManifestPath, b.StorageVersion = p.String(), StorageV3 }
}

func ptrAt(seg, v int64) commands.ManifestPointer {
	return commands.ManifestPointer{Base: commands.ManifestBase(coll, 1, seg), Version: v}
}

func retire(term uint64, rs ...*logpb.ManifestRetirement) commands.Command {
	return cmd(&logpb.RetireManifestRevisions{Retirements: rs}, withTerm(term), withProposedAt(4000))
}

func retirement(seg, from, through int64) *logpb.ManifestRetirement {
	return &logpb.ManifestRetirement{Base: commands.ManifestBase(coll, 1, seg), From: from, Through: through}
}

func retiredResult(ok ...bool) func(t *testing.T, r *logpb.Result) {
	return func(t *testing.T, r *logpb.Result) {
		t.Helper()
		got := r.GetManifestRetired().GetRetired()
		if r.Rejection != nil || len(got) != len(ok) {
			t.Fatalf("retirement answered %v, want retired %v", r, ok)
		}
		for i := range ok {
			if got[i] != ok[i] {
				t.Fatalf("retirement answered %v, want retired %v", r, ok)
			}
		}
	}
}

// D5: an inline pointer must lie at the segment's own base, and the
// refusal changes nothing (also not the pointer's later base).
func TestInlinePointerAtAnotherSegmentsBaseIsRefused(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2))...)
	for name, p := range map[string]commands.ManifestPointer{
		"another segment's base": ptrAt(2, 1),
		"a segment that is not":  ptrAt(777, 1),
		"outside the layout":     {Base: "custom/1", Version: 1},
		"another partition":      {Base: commands.ManifestBase(coll, 9, 1), Version: 1},
	} {
		t.Run(name, func(t *testing.T) {
			next, res := mustApply(t, s, save(1, 50, 6, 150, withPointer(p)))
			checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "the segment's is")
			sameExceptApplied(t, s, next)
		})
	}
	next, res := mustApply(t, s, save(1, 50, 6, 150, withPointer(ptrAt(1, 1))))
	if res[0].Rejection != nil || pointerOf(t, next, 1) != 1 {
		t.Fatalf("own base refused: %v", res[0])
	}
	// A prepared publication and a structured first revision follow the
	// same rule.
	for name, p := range map[string]*logpb.ManifestPublish{
		"prepared":   {SegmentId: 2, Next: ptrAt(1, 1).String(), Prepared: true},
		"structured": {SegmentId: 2, Next: ptrAt(777, 1).String()},
	} {
		after, res := mustApply(t, s, mcommit(p))
		checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "the segment's is")
		sameExceptApplied(t, s, after)
		_ = name
	}
}

// M1 in the state machine: once a retirement commits, no path may publish
// a retired version — an inline save or an import finish answers invalid,
// a structured commit stale, a prepared one invalid — while a newer
// version publishes.
func TestRetiredVersionsAreNeverPublished(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), save(1, 50, 6, 150, withPointer(ptrAt(1, 1))))...)
	s, res := mustApply(t, s, retire(2, retirement(1, 2, 4)))
	retiredResult(true)(t, res[0])
	if w := s.ManifestRetired(commands.ManifestBase(coll, 1, 1)); w != 4 {
		t.Fatalf("watermark %d, want 4", w)
	}
	for v := int64(2); v <= 4; v++ {
		next, res := mustApply(t, s, save(1, 51, 6, 160, withPointer(ptrAt(1, v))))
		checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "retired by the orphan collector")
		sameExceptApplied(t, s, next)
	}
	structured := mcommit(&logpb.ManifestPublish{SegmentId: 1, Base: ptrAt(1, 1).String(), Next: ptrAt(1, 3).String()})
	_, res = mustApply(t, s, structured)
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_STALE), "retired")
	prepared := mcommit(&logpb.ManifestPublish{SegmentId: 1, Next: ptrAt(1, 4).String(), Prepared: true})
	_, res = mustApply(t, s, prepared)
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "retired")
	// The same pointer again is a no-op, and a newer one publishes.
	if _, res = mustApply(t, s, save(1, 50, 6, 150, withPointer(ptrAt(1, 1)))); res[0].Rejection != nil {
		t.Fatalf("repeat of the published pointer: %v", res[0])
	}
	next, res := mustApply(t, s, save(1, 51, 6, 160, withPointer(ptrAt(1, 5))))
	if res[0].Rejection != nil || pointerOf(t, next, 1) != 5 {
		t.Fatalf("version 5 after the watermark: %v", res[0])
	}
}

// A retirement loses to any publication that reached its range, to an
// Importing segment and to a never-allocated ID; it is fenced by its
// decision term; kept entries change nothing while others in the same
// command are retired.
func TestRetirementIsKeptWhenAPublicationOvertookIt(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), save(1, 50, 6, 150, withPointer(ptrAt(1, 2))), createSeg(v0, 1, 2))...)
	next, res := mustApply(t, s, retire(2, retirement(1, 2, 3), retirement(2, 1, 1), retirement(99, 1, 1)))
	retiredResult(false, true, false)(t, res[0])
	if next.ManifestRetired(commands.ManifestBase(coll, 1, 1)) != 0 || next.ManifestRetired(commands.ManifestBase(coll, 1, 2)) != 1 {
		t.Fatal("a kept entry changed the state, or a retired one did not")
	}
	_, res = mustApply(t, s, retire(2, retirement(2, 1, 1)), leaderEstablished(3, "c3"), retire(2, retirement(2, 1, 1)))
	if res[0].GetManifestRetired() == nil || res[2].Rejection.GetCode() != logpb.RejectCode_REJECT_STALE {
		t.Fatalf("decision-term fence: %v / %v", res[0], res[2])
	}
}

// A base no segment publishes is retired by raising the creation floor:
// a manifest commit can no longer create that segment, and an L0 save
// that creates one below the floor can never publish a manifest. Pruning
// the last publisher of a base with a watermark folds it into the floor;
// snapshots keep both.
func TestRetiringAGoneBaseRaisesTheCreationFloor(t *testing.T) {
	s := build(t, mfBase()...) // ids 1..99 reserved, none used
	s, res := mustApply(t, s, retire(2, retirement(40, 1, 3)))
	retiredResult(true)(t, res[0])
	if s.ManifestCreateFloor() != 41 || s.RetiredManifestCount() != 0 {
		t.Fatalf("floor %d, %d watermarks", s.ManifestCreateFloor(), s.RetiredManifestCount())
	}
	_, res = mustApply(t, s, mcommit(createPub(40)))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "creation floor")
	if _, res = mustApply(t, s, mcommit(createPub(41))); res[0].Rejection != nil {
		t.Fatalf("create 41 above the floor: %v", res[0])
	}
	l0 := func(edits ...saveEdit) commands.Command {
		return save(30, 1, 0, 100, append([]saveEdit{func(b *logpb.SaveBinlogPaths) { b.Level, b.Binlogs, b.Flushed = lvL0, nil, true }}, edits...)...)
	}
	_, res = mustApply(t, s, l0(withPointer(ptrAt(30, 1))))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "creation floor")
	late, res := mustApply(t, s, l0())
	if res[0].Rejection != nil || late.ManifestRetired(commands.ManifestBase(coll, 1, 30)) != math.MaxInt64 {
		t.Fatalf("late L0 creation: %v, watermark %d", res[0], late.ManifestRetired(commands.ManifestBase(coll, 1, 30)))
	}
	restored, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, late)))
	if err != nil || !bytes.Equal(snapshotBytes(t, restored), snapshotBytes(t, late)) || restored.ManifestCreateFloor() != 41 {
		t.Fatalf("snapshot round trip: %v", err)
	}
	// Pruning the fenced segment folds its watermark into the floor.
	dropped, _ := mustApply(t, late, save(30, 1, 0, 100, func(b *logpb.SaveBinlogPaths) { b.Level, b.Binlogs, b.Dropped = lvL0, nil, true }))
	dropped, _ = mustApply(t, dropped, cpUpdate(1, v0, 2, ComposeTS(6000))) // the checkpoint passes its rows
	pruned, _ := mustApply(t, dropped, cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 10, DecisionTerm: 2}, withProposedAt(1<<40)))
	if pruned.RetiredManifestCount() != 0 || pruned.ManifestCreateFloor() != 41 {
		t.Fatalf("after the prune: %d watermarks, floor %d", pruned.RetiredManifestCount(), pruned.ManifestCreateFloor())
	}
}

// D6: a catalog mutation's object keys must be clean and lie under the
// segment's own directories; a refusal changes nothing.
func TestManifestCommitRefusesForeignObjectKeys(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)), mcommit(createPub(6)))...)
	bad := map[string]string{
		"climbs":                 "../../etc/passwd",
		"absolute":               "/etc/passwd",
		"nul":                    "a\x00b",
		"climbs inside a prefix": "insert_log/../../../x",
		"another collection":     "insert_log/200/1/5/100/1",
		"another segment":        "insert_log/100/1/6/100/1",
		"another revision":       "manifest/100/1/6/manifest-1",
		"own revision":           "manifest/100/1/5/manifest-1",
		"outside the layout":     "stats/5/bloom",
	}
	for name, key := range bad {
		t.Run(name, func(t *testing.T) {
			p := advance(5, 1)
			p.Catalog = &logpb.ManifestCatalogMutation{Stats: []*logpb.ManifestStats{{Key: "bloom", Files: []string{key}}}}
			next, res := mustApply(t, s, mcommit(p))
			checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "")
			sameExceptApplied(t, s, next)
			up := advance(5, 1)
			up.Catalog = &logpb.ManifestCatalogMutation{IndexUpserts: []*logpb.SegmentIndexRecord{{BuildId: 40, SegmentId: 5, IndexId: 41, Files: []string{key}}}}
			next, res = mustApply(t, s, mcommit(up))
			checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "")
			sameExceptApplied(t, s, next)
		})
	}
	for _, key := range []string{"a..b/x", "x/..y"} {
		if _, err := commands.ParseObjectKey(key); err != nil {
			t.Errorf("%q refused: %v", key, err)
		}
	}
	for _, badName := range []string{"../x", "/k", "a\x00", "a//b"} {
		p := advance(5, 1)
		p.Catalog = &logpb.ManifestCatalogMutation{Stats: []*logpb.ManifestStats{{Key: badName, Files: []string{segKey(5, "1")}}}}
		_, res := mustApply(t, s, mcommit(p))
		checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "stats key")
	}
}

// A restored state's legacy pointer at another segment's base (accepted
// before the own-base rule) still attributes that base to its segment:
// the collector may not retire what it publishes.
func TestLegacyForeignPointerKeepsItsBase(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), save(1, 50, 6, 150, withPointer(ptrAt(1, 1))))...)
	g, _ := s.Segment(1)
	legacy := *g
	legacy.ManifestPath = ptrAt(777, 3).String()
	s.seg.put(&legacy)
	restored, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	if u := restored.ManifestBaseUse(commands.ManifestBase(coll, 1, 777)); u.Published != 3 || len(u.Segments) != 1 {
		t.Fatalf("legacy base use %+v", u)
	}
	_, res := mustApply(t, restored, retire(2, retirement(777, 2, 5)))
	retiredResult(false)(t, res[0])
	next, res := mustApply(t, restored, retire(2, retirement(777, 4, 5)))
	retiredResult(true)(t, res[0])
	_, res = mustApply(t, next, save(1, 51, 6, 160, withPointer(ptrAt(777, 4))))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "retired")
	if _, res = mustApply(t, next, save(1, 51, 6, 160, withPointer(ptrAt(777, 6)))); res[0].Rejection != nil {
		t.Fatalf("legacy segment's next version: %v", res[0])
	}
}

// A legacy pointer at the base of an ID not allocated yet: pruning its
// segment cannot fold the watermark into the creation floor (the floor
// never passes the IDs allocated), so the watermark stays.
func TestPruneKeepsTheWatermarkOfAnUnallocatedBase(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), save(1, 50, 6, 150, withPointer(ptrAt(1, 1))))...)
	g, _ := s.Segment(1)
	legacy := *g
	legacy.ManifestPath = ptrAt(5000, 1).String()
	s.seg.put(&legacy)
	s, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	s, res := mustApply(t, s, retire(2, retirement(5000, 2, 3)))
	retiredResult(true)(t, res[0])
	s, _ = mustApply(t, s, save(1, 51, 0, 160, droppedSave, noBinlogs))
	s, _ = mustApply(t, s, cpUpdate(1, v0, 2, ComposeTS(6000))) // the checkpoint passes its rows
	s, _ = mustApply(t, s, cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 10, DecisionTerm: 2}, withProposedAt(1<<40)))
	if _, ok := s.Segment(1); ok || s.ManifestRetired(commands.ManifestBase(coll, 1, 5000)) != 3 || uint64(s.ManifestCreateFloor()) > s.NextID() {
		t.Fatalf("after the prune: watermark %d, floor %d (next id %d)", s.ManifestRetired(commands.ManifestBase(coll, 1, 5000)), s.ManifestCreateFloor(), s.NextID())
	}
}

// Probe L17: a pointer at version 0 ("no revision yet") is not a
// publication, and its refusal says so instead of blaming the orphan
// collector, which retired nothing; the state is unchanged.
func TestPointerVersionZeroIsNotAPublication(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2))...) // no revision published yet
	next, res := mustApply(t, s, save(1, 50, 6, 150, withPointer(ptrAt(1, 0))))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "version 0 names no revision")
	if strings.Contains(res[0].Rejection.GetMessage(), "retired") {
		t.Fatalf("version 0 refused as retired: %v", res[0])
	}
	sameExceptApplied(t, s, next)
}
