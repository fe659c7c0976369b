package fsm

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// genSegmentCommand draws a write-path command against s: mostly from the
// right owner and about existing segments, sometimes from a wrong node or
// an old term, sometimes a reassignment that makes the previous owner stale.
func genSegmentCommand(t *rapid.T, label string, s *State) commands.Command {
	vch := rapid.SampledFrom([]string{v0, v1}).Draw(t, label+".vch")
	p, _ := s.PChannel(vocab.PChannelOf(vch))
	node, term := p.NodeId, p.Term
	switch rapid.IntRange(0, 5).Draw(t, label+".owner") {
	case 0:
		node = rapid.Uint64Range(1, 3).Draw(t, label+".node")
	case 1:
		term = rapid.Int64Range(1, term+1).Draw(t, label+".term")
	}
	var ids []int64
	for _, g := range s.SegmentsOfVChannel(vch) {
		ids = append(ids, g.ID)
	}
	pickID := func() int64 {
		if len(ids) == 0 || rapid.IntRange(0, 9).Draw(t, label+".unknown") == 0 {
			return rapid.Int64Range(1, int64(s.NextID())+2).Draw(t, label+".anyID")
		}
		return rapid.SampledFrom(ids).Draw(t, label+".id")
	}
	ts := rapid.Uint64Range(1, 1000).Draw(t, label+".ts")
	// A reported position's term and time tick, now and then out of bounds
	// (a term past the PChannel's, a tick at or just below the TSO bound).
	posTerm, posTs := term, ts
	switch rapid.IntRange(0, 15).Draw(t, label+".bounds") {
	case 0:
		posTerm = p.Term + 1
	case 1:
		posTs = s.MaxPositionTs()
	case 2:
		posTs = s.MaxPositionTs() - 1
	}
	decision := rapid.SampledFrom([]uint64{s.EstablishedTerm(), s.EstablishedTerm(), s.EstablishedTerm() + 1}).Draw(t, label+".decision")
	switch rapid.IntRange(0, 12).Draw(t, label+".kind") {
	case 11:
		return cmd(&logpb.CreateImportSegment{CollectionId: coll, PartitionId: 1, Vchannel: vch, NodeId: node, PchannelTerm: term, Level: lvL1})
	case 12:
		id := pickID()
		var imports []int64 // import segments (storage version 3), finished or not
		for _, g := range s.SegmentsOfVChannel(vch) {
			if g.StorageVersion == StorageV3 {
				imports = append(imports, g.ID)
			}
		}
		if len(imports) > 0 && rapid.IntRange(0, 4).Draw(t, label+".anyImport") > 0 {
			id = rapid.SampledFrom(imports).Draw(t, label+".import")
		}
		b := &logpb.FinishImportSegment{SegmentId: id, CollectionId: coll, Vchannel: vch, NodeId: node, PchannelTerm: term,
			ManifestPath: mptr(id, rapid.Int64Range(1, 2).Draw(t, label+".version")),
			NumOfRows:    rapid.SampledFrom([]int64{0, 2, 2, 2}).Draw(t, label+".importRows")}
		if g, ok := s.Segment(id); ok && g.State == sgFlushed && g.ManifestPath != "" && rapid.IntRange(0, 3).Draw(t, label+".retry") > 0 {
			b.ManifestPath, b.NumOfRows = g.ManifestPath, g.NumRows // the retry of a finish that committed
		}
		return cmd(b)
	case 10:
		return cmd(&logpb.PruneDroppedSegments{RetentionMs: rapid.Int64Range(1000, 1100).Draw(t, label+".retention"),
			MaxCount: rapid.Uint32Range(1, 3).Draw(t, label+".max"), DecisionTerm: decision})
	case 0, 1:
		return cmd(&logpb.CreateSegment{CollectionId: coll, PartitionId: 1, Vchannel: vch, NodeId: node, PchannelTerm: term})
	case 2:
		if rapid.Bool().Draw(t, label+".whole") {
			return sealColl(decision, ts, coll)
		}
		return sealSegs(decision, ts, pickID())
	case 3:
		return markFlushing(decision, pickID())
	case 4, 5, 6:
		id := pickID()
		rows := rapid.Int64Range(0, 5).Draw(t, label+".rows")
		b := &logpb.SaveBinlogPaths{NodeId: node, Vchannel: vch, PchannelTerm: term, SegmentId: id, CollectionId: coll, PartitionId: 1,
			Level:       rapid.SampledFrom([]logpb.SegmentLevel{lvL1, lvL1, lvL1, lvL0}).Draw(t, label+".level"),
			Checkpoints: []*logpb.SegmentCheckpointUpdate{{SegmentId: id, Position: wpos(posTerm, ts, posTs), NumOfRows: rows}},
			Flushed:     rapid.Bool().Draw(t, label+".flushed"), Dropped: rapid.IntRange(0, 6).Draw(t, label+".dropped") == 0,
			WithFullBinlogs: rapid.IntRange(0, 4).Draw(t, label+".full") == 0}
		if rows > 0 {
			b.Binlogs = []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{binlog(rapid.Int64Range(1, 20).Draw(t, label+".log"), rows)}}}
		}
		return cmd(b)
	case 7, 8:
		return cmd(&logpb.UpdateChannelCheckpoints{NodeId: node, Checkpoints: []*logpb.ChannelCheckpointUpdate{
			{Vchannel: vch, PchannelTerm: term, Position: wpos(posTerm, ts, posTs)}}})
	default:
		target := rapid.Uint64Range(1, 3).Draw(t, label+".target")
		pc := vocab.PChannelOf(vch)
		return cmd(&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{asg(pc, target, p.Term)}})
	}
}

// TestSegmentProperties applies command streams and checks, after every
// entry: the structural invariants and the successor relation (allowed
// state moves, DML positions and checkpoints never go back, the dropped
// sentinel is terminal, a Flushed segment's binlogs change only by a
// drop); that a command from a non-owner or an old term, or one reporting
// a position out of bounds, changes nothing; and that two replicas and a
// snapshot restore agree. The streams are a fixed one (coverageStream)
// and random ones (genSegmentCommand). The coverage list is checked on the
// fixed stream, which reaches every outcome by construction: each outcome
// goes through the checks on every run, whatever the random streams
// happen to draw (what they reached is logged).
func TestSegmentProperties(t *testing.T) {
	start := build(t, segBase()...)
	reached := map[string]int{}
	s, replica := start, start
	for _, c := range coverageStream() {
		s, replica = segmentStep(t, s, replica, c, reached)
	}
	checkRestore(t, s)
	random := map[string]int{}
	rapid.Check(t, func(t *rapid.T) {
		s, replica := start, start
		n := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := 0; i < n; i++ {
			c := genSegmentCommand(t, "c", s)
			c.ProposedAtUnixMs = int64(1000 + 60*i)
			s, replica = segmentStep(t, s, replica, c, random)
		}
		checkRestore(t, s)
	})
	for _, k := range []string{"CreateSegment", "SealSegments", "MarkSegmentsFlushing", "PruneDroppedSegments", "save -> Flushed", "save -> Dropped",
		"save -> Growing", "stale save", "checkpoint accepted", "rejected SaveBinlogPaths", "rejected CreateSegment",
		"CreateImportSegment", "import -> Flushed", "import unchanged", "rejected FinishImportSegment",
		"out of bounds SaveBinlogPaths", "out of bounds UpdateChannelCheckpoints"} {
		if reached[k] == 0 {
			t.Errorf("the fixed stream never reached %q (reached: %v)", k, reached)
		}
	}
	t.Logf("random streams reached %v", random)
}

// coverageStream is a fixed command stream from segBase that reaches
// every outcome TestSegmentProperties lists.
func coverageStream() []commands.Command {
	prune := cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 3, DecisionTerm: 2}, withProposedAt(10_000))
	finish := func(node uint64) commands.Command {
		return cmd(&logpb.FinishImportSegment{SegmentId: 3, CollectionId: coll, Vchannel: v0, NodeId: node, PchannelTerm: 2,
			ManifestPath: mptr(3, 1), NumOfRows: 2})
	}
	return []commands.Command{
		createSeg(v0, 1, 2), // 1
		createSeg(v0, 3, 2), // rejected: not the owner
		save(1, 50, 5, 100), // Growing
		save(1, 50, 5, 90),  // stale: an older DML position
		save(1, 51, 5, 110, func(b *logpb.SaveBinlogPaths) { b.Checkpoints[0].Position.Term = 3 }), // out of bounds
		sealSegs(2, 150, 1),
		markFlushing(2, 1),
		save(1, 51, 5, 160, flushed),
		createSeg(v0, 1, 2),                                          // 2
		save(2, 0, 0, 170, droppedSave, noBinlogs),                   // Dropped at 2000 ms, DML at 170
		save(2, 52, 1, 171, fromNode(3, 2)),                          // rejected: not the owner
		cpUpdate(1, v0, 2, 200),                                      // accepted
		cpUpdate(1, v0, 2, ComposeTS(segTSOLimitMs+PositionSlackMs)), // out of bounds
		prune, // segment 2: past the retention and the checkpoint
		cmd(&logpb.CreateImportSegment{CollectionId: coll, PartitionId: 1, Vchannel: v0, NodeId: 1, PchannelTerm: 2, Level: lvL1}), // 3
		finish(1), // Flushed
		finish(1), // the retry: unchanged
		finish(2), // rejected: not the owner
	}
}

// segmentStep applies c to s and to its replica and checks every property
// of TestSegmentProperties on the step.
func segmentStep(t rapid.TB, s, replica *State, c commands.Command, reached map[string]int) (*State, *State) {
	t.Helper()
	next, res, err := s.ApplyCommands(s.AppliedIndex()+1, c)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if err := next.CheckInvariants(); err != nil {
		t.Fatalf("invariants after %s: %v", c.Type, err)
	}
	if err := Successor(s, next); err != nil {
		t.Fatalf("successor after %s %v: %v", c.Type, c.Body, err)
	}
	checkOwnerProperty(t, s, next, c, res[0])
	if checkBoundsProperty(t, s, next, c) {
		reached["out of bounds "+c.Type.String()]++
	}
	checkCountIn(t, next)
	checkPruneProperty(t, s, c, res[0])
	checkSeekProperty(t, next)
	countReached(reached, c, res[0])
	r2, _, err := replica.ApplyCommands(replica.AppliedIndex()+1, c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, next), snapshotBytes(t, r2)) {
		t.Fatalf("replicas diverged after %s", c.Type)
	}
	return next, r2
}

// checkRestore: a snapshot of s restores to the same bytes and the same
// recovery answers.
func checkRestore(t rapid.TB, s *State) {
	t.Helper()
	data := snapshotBytes(t, s)
	restored, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), data) {
		t.Fatal("restored state snapshots differently")
	}
	for _, v := range []string{v0, v1} {
		a, errA := s.RecoveryInfo(v)
		b, errB := restored.RecoveryInfo(v)
		if (errA == nil) != (errB == nil) || a.Seek != b.Seek || len(a.Unflushed) != len(b.Unflushed) || len(a.Flushed) != len(b.Flushed) {
			t.Fatalf("recovery info of %s differs after restore", v)
		}
	}
}

// checkBoundsProperty: a save or checkpoint that reports a position out
// of the bounds prev allows (a term past the PChannel's, a time tick at or
// past MaxPositionTs) changes nothing. It reports whether c did.
func checkBoundsProperty(t rapid.TB, prev, next *State, c commands.Command) bool {
	t.Helper()
	out := func(vch string, p *logpb.WALPosition) bool {
		pc, _ := prev.PChannel(vocab.PChannelOf(vch))
		return p.GetTerm() > pc.Term || p.GetTimestamp() >= prev.MaxPositionTs()
	}
	bad := false
	switch b := c.Body.(type) {
	case *logpb.SaveBinlogPaths:
		for _, cp := range b.Checkpoints {
			bad = bad || out(b.Vchannel, cp.Position)
		}
	case *logpb.UpdateChannelCheckpoints:
		for _, u := range b.Checkpoints {
			bad = bad || out(u.Vchannel, u.Position)
		}
	}
	if bad && !sameExceptAppliedRapid(t, prev, next) {
		t.Fatalf("a %s with a position out of bounds changed the state", c.Type)
	}
	return bad
}

// checkPruneProperty: a segment PruneDroppedSegments forgot was Dropped
// past the retention and its VChannel's checkpoint had passed its rows
// (docs/semantics.md#segment-states), stated here without PrunableDropped.
func checkPruneProperty(t rapid.TB, prev *State, c commands.Command, r *logpb.Result) {
	t.Helper()
	b, ok := c.Body.(*logpb.PruneDroppedSegments)
	if !ok || r.Rejection != nil {
		return
	}
	for _, id := range r.GetSegments().GetIds() {
		g, ok := prev.Segment(id)
		if !ok || g.State != sgDropped || g.DroppedMs > c.ProposedAtUnixMs-b.RetentionMs {
			t.Fatalf("pruned segment %d: %+v", id, g)
		}
		cp, ok := prev.ChannelCheckpoint(g.VChannel)
		p := g.DML
		if p.IsZero() {
			p = g.Start
		}
		passed := ok && (cp.Dropped() || (p.IsZero() && PhysicalMs(cp.Position.Timestamp) > g.DroppedMs) ||
			(!p.IsZero() && p.Timestamp < cp.Position.Timestamp))
		if !passed {
			t.Fatalf("segment %d (position %+v) pruned before its checkpoint (%+v) passed it", id, p, cp)
		}
	}
}

// checkSeekProperty: without a channel checkpoint, recovery seeks at or
// before every unflushed segment's position, and from the beginning when
// one has none (spec invariant: no unsaved row is skipped).
func checkSeekProperty(t rapid.TB, s *State) {
	t.Helper()
	for _, v := range []string{v0, v1} {
		if _, ok := s.ChannelCheckpoint(v); ok {
			continue
		}
		info, err := s.RecoveryInfo(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range info.Unflushed {
			p := g.DML
			if p.IsZero() {
				p = g.Start
			}
			if !info.Seek.IsZero() && (p.IsZero() || p.Less(info.Seek)) {
				t.Fatalf("recovery of %s seeks to %+v, past unflushed segment %d at %+v", v, info.Seek, g.ID, p)
			}
		}
	}
}

func sameExceptAppliedRapid(t rapid.TB, prev, next *State) bool {
	b := *prev
	b.applied = next.applied
	return bytes.Equal(snapshotBytes(t, &b), snapshotBytes(t, next))
}

func countReached(reached map[string]int, c commands.Command, r *logpb.Result) {
	switch {
	case r.Rejection != nil:
		reached["rejected "+c.Type.String()]++
	case r.GetSaveBinlogs().GetStale():
		reached["stale save"]++
	case r.GetSaveBinlogs() != nil:
		reached["save -> "+SegmentStateName(r.GetSaveBinlogs().State)]++
	case r.GetImportFinished().GetUnchanged():
		reached["import unchanged"]++
	case r.GetImportFinished() != nil:
		reached["import -> "+SegmentStateName(r.GetImportFinished().State)]++
	case r.GetCheckpoints().GetAccepted() > 0:
		reached["checkpoint accepted"]++
	case len(r.GetSegments().GetIds()) > 0:
		reached[c.Type.String()]++
	}
}

// checkOwnerProperty: a save or checkpoint from anyone but the current
// (node, term) owner never changes the state; a stale save writes nothing.
func checkOwnerProperty(t rapid.TB, prev, next *State, c commands.Command, r *logpb.Result) {
	t.Helper()
	same := func() bool { return sameExceptAppliedRapid(t, prev, next) }
	switch b := c.Body.(type) {
	case *logpb.SaveBinlogPaths:
		if prev.CheckChannelOwner(b.Vchannel, b.NodeId, b.PchannelTerm) != nil {
			if r.Rejection == nil || !same() {
				t.Fatalf("a non-owner save was applied: %v", r)
			}
		}
		if r.GetSaveBinlogs().GetStale() && !same() {
			t.Fatal("a stale save wrote something")
		}
	case *logpb.UpdateChannelCheckpoints:
		u := b.Checkpoints[0]
		if prev.CheckChannelOwner(u.Vchannel, b.NodeId, u.PchannelTerm) != nil && !same() {
			t.Fatal("a non-owner checkpoint was applied")
		}
	case *logpb.FinishImportSegment:
		if (prev.CheckChannelOwner(b.Vchannel, b.NodeId, b.PchannelTerm) != nil || r.Rejection != nil || r.GetImportFinished().GetUnchanged()) && !same() {
			t.Fatalf("a refused or unchanged import finish changed the state: %v", r)
		}
	case *logpb.CreateImportSegment:
		if prev.CheckChannelOwner(b.Vchannel, b.NodeId, b.PchannelTerm) != nil && r.Rejection == nil {
			t.Fatal("a non-owner created an import segment")
		}
	case *logpb.CreateSegment:
		if prev.CheckChannelOwner(b.Vchannel, b.NodeId, b.PchannelTerm) != nil && r.Rejection == nil {
			t.Fatal("a non-owner created a segment")
		}
	}
}

func TestSegmentSnapshotRoundTrip(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), createSeg(v1, 2, 2), save(1, 50, 10, 100),
		sealSegs(2, 150, 1), markFlushing(2, 1), save(1, 51, 4, 160, flushed), cpUpdate(1, v0, 2, 170))...)
	data := snapshotBytes(t, s)
	r, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, r), data) {
		t.Fatal("restored state snapshots differently")
	}
	g, _ := r.Segment(1)
	if g.State != sgFlushed || g.NumRows != 14 || g.SealTs != 150 || len(g.InsertLogPaths()) != 2 ||
		r.SegmentCountBy(sgFlushed, lvL1) != 1 || r.SegmentCountBy(sgGrowing, lvL1) != 1 || len(r.SegmentsOfCollection(coll)) != 2 {
		t.Fatalf("restored segment %+v, counts wrong", g)
	}
	if cp, ok := r.ChannelCheckpoint(v0); !ok || cp.Position.Timestamp != 170 {
		t.Fatalf("restored checkpoint %+v", cp)
	}
	// Restored records share the collection's VChannel string.
	if g2, _ := r.Segment(2); g2.VChannel != v1 {
		t.Fatalf("segment 2 vchannel %q", g2.VChannel)
	}
}

// checkCountIn: SegmentCountIn agrees with a scan of every segment.
func checkCountIn(t rapid.TB, s *State) {
	by := map[logpb.SegmentState]int{}
	s.EachSegment(func(g *Segment) bool { by[g.State]++; return true })
	for v := range logpb.SegmentState_name {
		if st := logpb.SegmentState(v); s.SegmentCountIn(st) != by[st] {
			t.Fatalf("SegmentCountIn(%s) = %d, a scan counts %d", st, s.SegmentCountIn(st), by[st])
		}
	}
}
