package fsm

import (
	"math"
	"strings"
	"testing"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// replayState is what a recovering flusher builds from RecoveryInfo
// (client.RecoveryStateOf does the same from the API answer).
func replayState(info RecoveryInfo) client.RecoveryState {
	rs := client.RecoveryState{VChannel: info.VChannel, Dropped: info.Dropped}
	if !info.Seek.IsZero() {
		rs.Seek = &client.ReplayPosition{Term: info.Seek.Term, Offset: info.Seek.Offset, Timestamp: info.Seek.Timestamp}
	}
	for _, g := range info.Unflushed {
		if !g.DML.IsZero() {
			rs.Persisted = append(rs.Persisted, client.ReplaySegment{ID: g.ID, DMLTimestamp: g.DML.Timestamp})
		}
	}
	for _, g := range info.Flushed {
		rs.Persisted = append(rs.Persisted, client.ReplaySegment{ID: g.ID, DMLTimestamp: g.DML.Timestamp})
	}
	for _, g := range info.DroppedSegments {
		rs.DroppedSegments = append(rs.DroppedSegments, g.ID)
	}
	return rs
}

// W1: without a channel checkpoint, a segment whose rows were never saved
// (no position in coordd) must not be skipped because another segment
// saved later rows.
func TestAuditSeekSkipsUnpositionedSegment(t *testing.T) {
	st, _ := mustApply(t, New(), segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2),
		save(1, 50, 6, 50, func(b *logpb.SaveBinlogPaths) {
			b.StartPositions = []*logpb.SegmentStartUpdate{{SegmentId: 1, Position: wpos(2, 10, 10)}}
		}))...)
	info, err := st.RecoveryInfo(v0) // segment 2's rows are at offsets/ticks 20..40, never saved
	if err != nil {
		t.Fatal(err)
	}
	f := client.NewReplayFilter(replayState(info))
	lost := 0
	for ts := uint64(20); ts <= 40; ts++ {
		if (ts < info.Seek.Timestamp || info.Seek.Offset > ts) || !f.Keep(2, ts) {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("recovery seeks to offset %d (ts %d): %d unsaved rows of segment 2 (offsets 20..40) are never replayed", info.Seek.Offset, info.Seek.Timestamp, lost)
	}
}

// W2: a Dropped segment is forgotten only once the VChannel's checkpoint
// has passed its rows; until then RecoveryInfo lists it and the filter
// drops its inserts.
func TestAuditPruneForgetsDroppedSegmentBeforeCheckpointPassesIt(t *testing.T) {
	prune := cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 10, DecisionTerm: 2}, withProposedAt(4*3600*1000))
	st, _ := mustApply(t, New(), segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2),
		cpUpdate(1, v0, 2, 90),                     // segment 2 holds rows buffered since tick 90
		save(1, 50, 6, 150, flushed),               // segment 1: rows at 100..150, flushed ...
		save(1, 0, 0, 150, droppedSave, noBinlogs), // ... then dropped (a compaction input)
		prune)...)
	info, _ := st.RecoveryInfo(v0)
	if client.NewReplayFilter(replayState(info)).Keep(1, 120) {
		t.Errorf("after the prune, recovery seeks to tick %d and keeps segment 1's insert at tick 120 (dropped list %v)", info.Seek.Timestamp, ids(info.DroppedSegments))
	}
	// Once the checkpoint has passed segment 1's DML position, it goes.
	st, res := mustApply(t, st, cpUpdate(1, v0, 2, 151), prune)
	if got := res[1].GetSegments().GetIds(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("prune after the checkpoint passed: %v", res[1])
	}
	if _, ok := st.Segment(1); ok {
		t.Fatal("segment 1 still kept")
	}
}

func TestPruneNeedsCheckpointPastDML(t *testing.T) {
	prune := func(at int64) commands.Command {
		return cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 10, DecisionTerm: 2}, withProposedAt(at))
	}
	// 1: dropped with its DML position at tick 100; 2: dropped, never
	// positioned (dropped at 2000 ms); 3: on v1, whose checkpoint is
	// absent.
	setup := segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2), createSeg(v1, 2, 2),
		save(1, 50, 10, 100, droppedSave),
		cmd(&logpb.SaveBinlogPaths{NodeId: 1, Vchannel: v0, PchannelTerm: 2, SegmentId: 2, CollectionId: coll, PartitionId: 1, Level: lvL1, Dropped: true}, withProposedAt(2000)),
		cmd(&logpb.SaveBinlogPaths{NodeId: 2, Vchannel: v1, PchannelTerm: 2, SegmentId: 3, CollectionId: coll, PartitionId: 1, Level: lvL1, Dropped: true,
			Checkpoints: []*logpb.SegmentCheckpointUpdate{{SegmentId: 3, Position: wpos(2, 5, 5)}}}, withProposedAt(2000)))
	runApplyCases(t, []applyCase{
		{name: "no checkpoint: nothing", setup: setup, cmd: prune(1 << 30), want: segResult(), unchanged: true},
		{name: "checkpoint at the DML tick: kept (a row at exactly that tick passes the floor)",
			setup: concat(setup, []commands.Command{cpUpdate(1, v0, 2, 100)}), cmd: prune(1 << 30), want: segResult(), unchanged: true},
		{name: "checkpoint past the DML tick", setup: concat(setup, []commands.Command{cpUpdate(1, v0, 2, 101)}), cmd: prune(1 << 30), want: segResult(1)},
		{name: "unpositioned: once the checkpoint's time is past the drop",
			setup: concat(setup, []commands.Command{cpUpdate(1, v0, 2, ComposeTS(2001))}), cmd: prune(1 << 30), want: segResult(1, 2)},
		{name: "unpositioned: not before", setup: concat(setup, []commands.Command{cpUpdate(1, v0, 2, ComposeTS(2000))}), cmd: prune(1 << 30), want: segResult(1)},
		{name: "a dropped vchannel passes everything", setup: concat(setup, []commands.Command{dropV(coll)}), cmd: prune(1 << 30), want: segResult(1, 2, 3)},
		{name: "age still counts", setup: concat(setup, []commands.Command{cpUpdate(1, v0, 2, 101)}), cmd: prune(2999), want: segResult(), unchanged: true},
	})
}

// TestPrunableDroppedAgreesWithApply: the leader proposes a prune only
// when PrunableDropped finds something, and Apply prunes exactly that.
func TestPrunableDroppedAgreesWithApply(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2), save(1, 50, 10, 100, droppedSave), save(2, 51, 10, 300, droppedSave), cpUpdate(1, v0, 2, 200))...)
	want := s.PrunableDropped(1<<30-1000, 10)
	_, res := mustApply(t, s, cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 10, DecisionTerm: 2}, withProposedAt(1<<30)))
	if got := res[0].GetSegments().GetIds(); !eqIDs(got, want) || !eqIDs(want, []int64{1}) {
		t.Fatalf("PrunableDropped %v, Apply pruned %v, want [1]", want, got)
	}
}

// W1: a CreateCollection broadcast stores a checkpoint at the message's
// position on every VChannel it records; a collection recorded earlier by
// AllocVirtualChannels (rows may precede the message) keeps none.
func TestCreationCheckpoint(t *testing.T) {
	va, vb := vocab.VChannelName(p0, 5, 0), vocab.VChannelName(p1, 5, 1)
	created := func(setup []commands.Command) (*State, uint64) {
		s, res := mustApply(t, build(t, setup...),
			createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 2)), withTargets(cch, va, vb)))
		return s, res[0].GetBroadcast().GetBroadcastId()
	}
	s, id := created(segBase())
	s, res := mustApply(t, s, ackB(id, cpt(cch, 2, 3, ComposeTS(500)), cpt(va, 2, 4, ComposeTS(501)), cpt(vb, 2, 9, ComposeTS(502))),
		completeB(id, withProposedAt(7000)))
	if res[1].GetCompletion().GetCallbackError() != "" {
		t.Fatalf("complete: %v", res[1])
	}
	for v, want := range map[string]Position{va: {2, 4, ComposeTS(501)}, vb: {2, 9, ComposeTS(502)}} {
		cp, ok := s.ChannelCheckpoint(v)
		if !ok || cp.Position != want || cp.PChannelTerm != 2 || cp.UpdatedMs != 7000 {
			t.Fatalf("creation checkpoint of %s: %+v %v, want %+v", v, cp, ok, want)
		}
		if info, _ := s.RecoveryInfo(v); info.Seek != want {
			t.Fatalf("recovery of %s seeks %+v", v, info.Seek)
		}
	}
	if _, ok := s.ChannelCheckpoint(cch); ok {
		t.Fatal("the cchannel got a checkpoint")
	}
	// The owner's first checkpoint moves it on.
	_, res = mustApply(t, s, cmd(&logpb.UpdateChannelCheckpoints{NodeId: 1, Checkpoints: []*logpb.ChannelCheckpointUpdate{
		{Vchannel: va, PchannelTerm: 2, Position: wpos(2, 5, ComposeTS(600))}}}))
	if res[0].GetCheckpoints().GetAccepted() != 1 {
		t.Fatalf("first owner checkpoint: %v", res[0])
	}

	// Recorded before by AllocVirtualChannels: no checkpoint from the retry.
	s, id = created(segBase(allocV(5, 2)))
	s, _ = mustApply(t, s, ackB(id, cpt(cch, 2, 3, 500), cpt(va, 2, 4, 501), cpt(vb, 2, 9, 502)), completeB(id))
	if len(s.ChannelCheckpoints()) != 0 {
		t.Fatalf("checkpoints after a retry on allocated vchannels: %+v", s.ChannelCheckpoints()[0])
	}

	// An acked position beyond the bounds is not stored.
	s, id = created(segBase())
	s, _ = mustApply(t, s, ackB(id, cpt(cch, 2, 3, 500), cpt(va, 2, 4, ComposeTS(segTSOLimitMs+PositionSlackMs)), cpt(vb, 2, 9, 502)), completeB(id))
	if _, ok := s.ChannelCheckpoint(va); ok {
		t.Fatal("a creation checkpoint beyond the TSO bound was stored")
	}
	if _, ok := s.ChannelCheckpoint(vb); !ok {
		t.Fatal("the other vchannel's creation checkpoint is missing")
	}
}

// tooLate is the first time tick segBase's bounds refuse.
var tooLate = ComposeTS(segTSOLimitMs + PositionSlackMs)

func cpAt(term int64, off, ts uint64) commands.Command {
	return cmd(&logpb.UpdateChannelCheckpoints{NodeId: 1, Checkpoints: []*logpb.ChannelCheckpointUpdate{
		{Vchannel: v0, PchannelTerm: 2, Position: wpos(term, off, ts)}}})
}

func TestCheckpointBounds(t *testing.T) {
	stored := segBase(cpAt(2, 50, 500))
	for _, tc := range []struct {
		name    string
		setup   []commands.Command
		cmd     commands.Command
		refused string // "" = accepted
	}{
		{"term beyond the pchannel's", segBase(), cpAt(3, 1, 10), "message term 3 is beyond pchannel dml_0's current term 2"},
		{"time tick at the TSO bound", segBase(), cpAt(2, 1, tooLate), "is beyond the committed TSO limit 1000000 ms plus 3000 ms"},
		{"time tick just below the TSO bound", segBase(), cpAt(2, 1, tooLate-1), ""},
		{"the bound follows the committed limit", segBase(extendTSO(segTSOLimitMs + 1)), cpAt(2, 1, tooLate), ""},
		{"offset back within the term", stored, cpAt(2, 49, 600), "offset 49 is before the stored offset 50 in term 2"},
		{"same offset, later tick (an idle owner)", stored, cpAt(2, 50, 600), ""},
		{"an older term names no offset order", stored, cpAt(1, 10, 600), ""},
		{"older tick", stored, cpAt(2, 60, 400), "not newer than the stored checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := build(t, tc.setup...)
			next, res := mustApply(t, s, tc.cmd)
			r := res[0].GetCheckpoints()
			if tc.refused == "" {
				if r.GetAccepted() != 1 {
					t.Fatalf("refused: %v", r.GetRefused())
				}
				return
			}
			if r.GetAccepted() != 0 || len(r.GetRefused()) != 1 || !strings.Contains(r.GetRefused()[0], tc.refused) {
				t.Fatalf("result %v, want a refusal with %q", r, tc.refused)
			}
			sameExceptApplied(t, s, next)
		})
	}
}

func TestSaveBounds(t *testing.T) {
	one := segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2))
	withDML := concat(one, []commands.Command{save(1, 50, 10, 100)})
	invalid := rejected(logpb.RejectCode_REJECT_INVALID)
	runApplyCases(t, []applyCase{
		{name: "checkpoint term beyond the pchannel's", setup: one,
			cmd:  save(1, 50, 10, 100, func(b *logpb.SaveBinlogPaths) { b.Checkpoints[0].Position.Term = 99 }),
			want: invalid, wantMsg: "message term 99 is beyond pchannel dml_0's current term 2", unchanged: true},
		{name: "start position beyond the TSO bound", setup: one,
			cmd: save(1, 50, 10, 100, func(b *logpb.SaveBinlogPaths) {
				b.StartPositions = []*logpb.SegmentStartUpdate{{SegmentId: 1, Position: wpos(2, 1, tooLate)}}
			}),
			want: invalid, wantMsg: "start position of segment 1", unchanged: true},
		{name: "another segment's checkpoint beyond the bound refuses the save", setup: one,
			cmd: save(1, 50, 10, 100, func(b *logpb.SaveBinlogPaths) {
				b.Checkpoints = append(b.Checkpoints, &logpb.SegmentCheckpointUpdate{SegmentId: 2, Position: wpos(2, 1, tooLate)})
			}),
			want: invalid, wantMsg: "checkpoint of segment 2", unchanged: true},
		{name: "binlog ending beyond the bound", setup: one, cmd: save(1, 50, 10, 100, tsRange(1, tooLate)),
			want: invalid, wantMsg: "log 50", unchanged: true},
		{name: "DML position back in offset within the term", setup: withDML,
			cmd:  save(1, 51, 10, 200, func(b *logpb.SaveBinlogPaths) { b.Checkpoints[0].Position.Offset = 99 }),
			want: invalid, wantMsg: "offset 99 is before the stored offset 100 in term 2", unchanged: true},
		{name: "another segment's DML back in offset: skipped", setup: concat(withDML, []commands.Command{
			save(2, 60, 1, 300)}),
			cmd: save(1, 51, 10, 200, func(b *logpb.SaveBinlogPaths) {
				b.Checkpoints = append(b.Checkpoints, &logpb.SegmentCheckpointUpdate{SegmentId: 2, Position: wpos(2, 250, 400), NumOfRows: 1})
			}),
			want: saveResult(false, sgGrowing),
			check: func(t *testing.T, _, after *State) {
				if g, _ := after.Segment(2); g.DML != (Position{2, 300, 300}) {
					t.Fatalf("segment 2's DML moved back: %+v", g.DML)
				}
			}},
	})
}

// D4: sums of row counts and sizes that overflow int64 are refused.
func TestSaveOverflowRefused(t *testing.T) {
	huge := func(field, logID int64) *logpb.FieldLogs {
		return &logpb.FieldLogs{FieldId: field, Logs: []*logpb.LogRef{{LogId: logID, EntriesNum: math.MaxInt64, MemorySize: math.MaxInt64, TimestampFrom: 1, TimestampTo: 2}}}
	}
	one := segBase(createSeg(v0, 1, 2))
	runApplyCases(t, []applyCase{
		// The probe's reproduction: two in-range entries_num/memory_size.
		{name: "sizes of two fields", setup: one, cmd: save(1, 1, 1, 100, func(b *logpb.SaveBinlogPaths) {
			b.Binlogs = []*logpb.FieldLogs{huge(100, 1), huge(101, 2)}
		}), want: rejected(logpb.RejectCode_REJECT_INVALID), wantMsg: "sizes of the save's logs add up", unchanged: true},
		{name: "size added to stored logs", setup: concat(one, []commands.Command{save(1, 1, 808, 100)}),
			cmd: save(1, 2, 1, 200, func(b *logpb.SaveBinlogPaths) {
				b.Binlogs = nil
				b.Statslogs = []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{{LogId: 3, MemorySize: math.MaxInt64, TimestampFrom: 101, TimestampTo: 200}}}}
			}), want: rejected(logpb.RejectCode_REJECT_INVALID), wantMsg: "sizes would exceed", unchanged: true},
		{name: "rows added to stored binlogs", setup: concat(one, []commands.Command{save(1, 1, 808, 100)}),
			cmd: save(1, 2, 1, 200, func(b *logpb.SaveBinlogPaths) {
				b.Binlogs = []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{{LogId: 2, EntriesNum: math.MaxInt64, TimestampFrom: 101, TimestampTo: 200}}}}
			}), want: rejected(logpb.RejectCode_REJECT_INVALID), wantMsg: "rows", unchanged: true},
		{name: "the largest sum that fits", setup: concat(one, []commands.Command{save(1, 1, 808, 100)}),
			cmd: save(1, 2, 1, 200, func(b *logpb.SaveBinlogPaths) {
				b.Binlogs = []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{{LogId: 2, EntriesNum: math.MaxInt64 - 808, TimestampFrom: 101, TimestampTo: 200}}}}
			}), want: saveResult(false, sgGrowing), check: wantSeg(1, sgGrowing, math.MaxInt64)},
	})
}

// Guards the issue asks for, each a one-line mutation away from wrong.
func TestSaveGuards(t *testing.T) {
	// v1's segment 2 (owner node 2) is named in a v0 save's checkpoint list.
	foreign := segBase(createSeg(v0, 1, 2), createSeg(v1, 2, 2), save(1, 50, 10, 100))
	runApplyCases(t, []applyCase{
		{name: "a checkpoint of another vchannel's segment is skipped", setup: foreign,
			cmd: save(1, 51, 10, 200, func(b *logpb.SaveBinlogPaths) {
				b.Checkpoints = append(b.Checkpoints, &logpb.SegmentCheckpointUpdate{SegmentId: 2, Position: wpos(2, 150, 150), NumOfRows: 7})
				b.StartPositions = []*logpb.SegmentStartUpdate{{SegmentId: 2, Position: wpos(2, 120, 120)}}
			}),
			want: saveResult(false, sgGrowing),
			check: func(t *testing.T, before, after *State) {
				a, _ := before.Segment(2)
				b, _ := after.Segment(2)
				if a.DML != b.DML || a.Start != b.Start || a.NumRows != b.NumRows || a.LastWriteMs != b.LastWriteMs {
					t.Fatalf("v1's segment 2 changed by a v0 save: %+v -> %+v", a, b)
				}
			}},
		{name: "a binlog starting exactly at the stored DML position is stale", setup: foreign,
			cmd: save(1, 51, 10, 200, afterDML, tsRange(100, 200)), want: saveResult(true, sgGrowing), unchanged: true},
		{name: "a binlog starting just after it is recorded", setup: foreign,
			cmd: save(1, 51, 10, 200, afterDML, tsRange(101, 200)), want: saveResult(false, sgGrowing)},
	})
}

func TestBoundMessagesAreClear(t *testing.T) {
	s := build(t, segBase()...)
	err := s.CheckTimeTick(v0, commands.DroppedTimestamp)
	if err == nil || !strings.Contains(err.Error(), "dropped sentinel") {
		t.Fatalf("tick 2^64-1: %v", err)
	}
	if err := s.CheckTimeTick(v0, tooLate); err == nil || !strings.Contains(err.Error(), "1000000 ms plus 3000 ms") {
		t.Fatalf("tick at the bound: %v", err)
	}
	if err := s.CheckTimeTick(v0, tooLate-1); err != nil {
		t.Fatal(err)
	}
}

// FuzzCheckpointBounds: whatever position an owner reports, an accepted
// checkpoint is within the bounds and later than the stored one (by time
// tick, and not at a lower offset in the same term), and a refused one
// changes nothing.
func FuzzCheckpointBounds(f *testing.F) {
	f.Add(int64(2), uint64(60), uint64(600))
	f.Add(int64(3), uint64(1), uint64(10))
	f.Add(int64(2), uint64(49), uint64(600))
	f.Add(int64(1), uint64(0), tooLate-1)
	f.Add(int64(2), uint64(1<<40), tooLate)
	f.Add(int64(-1), uint64(0), commands.DroppedTimestamp)
	base := build(f, segBase(cpAt(2, 50, 500))...)
	old, _ := base.ChannelCheckpoint(v0)
	f.Fuzz(func(t *testing.T, term int64, off, ts uint64) {
		c := cpAt(term, off, ts)
		if commands.Validate(c) != nil {
			return // the shape check refuses it before Apply
		}
		next, res, err := base.ApplyCommands(base.AppliedIndex()+1, c)
		if err != nil {
			t.Fatal(err)
		}
		cp, _ := next.ChannelCheckpoint(v0)
		if res[0].GetCheckpoints().GetAccepted() == 0 {
			if cp != old {
				t.Fatalf("a refused checkpoint {%d %d %d} replaced the stored one", term, off, ts)
			}
			return
		}
		p := cp.Position
		if p.Term > 2 || p.Timestamp >= base.MaxPositionTs() || !old.Position.Less(p) || (p.Term == old.Position.Term && p.Offset < old.Position.Offset) {
			t.Fatalf("accepted checkpoint %+v after %+v (bound %d)", p, old.Position, base.MaxPositionTs())
		}
	})
}
