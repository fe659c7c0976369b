package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// TestApplyAssignPChannels walks the PChannel state machine
// (docs/semantics.md#pchannels) for AssignPChannels (TryAssign), one
// transition per case.
func TestApplyAssignPChannels(t *testing.T) {
	assigning := base(assign(asg(p0, 1, 1)))                            // p0 ASSIGNING@2 on 1
	assignedP0 := base(assigned(p0, 1)...)                              // p0 ASSIGNED@2 on 1
	unavail := base(append(assigned(p0, 1), unavailable(pt(p0, 2)))...) // p0 UNAVAILABLE@2 on 1
	assignedRO := base(assign(asgMode(p0, 1, ro, 1)), done(pt(p0, 2)))  // p0 ASSIGNED@2 on 1, RO
	runApplyCases(t, []applyCase{
		{
			name:  "UNINITIALIZED -> ASSIGNING: term+1, no history",
			setup: base(),
			cmd:   assign(asg(p0, 2, 1)),
			want:  assignResult(pt(p0, 2)),
			check: all(wantPC(p0, stAssigning, 2, 2, rw), bumped(1), stampedPC(p0), pcUnchanged(p1)),
		},
		{
			name:  "UNINITIALIZED -> ASSIGNING in RO mode",
			setup: base(),
			cmd:   assign(asgMode(p0, 3, ro, 1)),
			want:  assignResult(pt(p0, 2)),
			check: wantPC(p0, stAssigning, 2, 3, ro),
		},
		{
			name:  "ASSIGNING -> ASSIGNING on another node: history of the old placement",
			setup: assigning,
			cmd:   assign(asg(p0, 2, 2)),
			want:  assignResult(pt(p0, 3)),
			check: all(wantPC(p0, stAssigning, 3, 2, rw, hist(2, 1, rw)), bumped(1), stampedPC(p0)),
		},
		{
			name:  "ASSIGNING -> ASSIGNING on the same node still bumps the term",
			setup: assigning,
			cmd:   assign(asg(p0, 1, 2)),
			want:  assignResult(pt(p0, 3)),
			check: all(wantPC(p0, stAssigning, 3, 1, rw, hist(2, 1, rw)), bumped(1)),
		},
		{
			name:      "ASSIGNED on the same node and mode is not modified",
			setup:     assignedP0,
			cmd:       assign(asg(p0, 1, 2)),
			want:      assignResult(),
			unchanged: true,
		},
		{
			name:  "ASSIGNED -> ASSIGNING on another node",
			setup: assignedP0,
			cmd:   assign(asg(p0, 3, 2)),
			want:  assignResult(pt(p0, 3)),
			check: all(wantPC(p0, stAssigning, 3, 3, rw, hist(2, 1, rw)), bumped(1), stampedPC(p0)),
		},
		{
			name:  "ASSIGNED -> ASSIGNING on the same node in another mode",
			setup: assignedRO,
			cmd:   assign(asg(p0, 1, 2)),
			want:  assignResult(pt(p0, 3)),
			check: wantPC(p0, stAssigning, 3, 1, rw, hist(2, 1, ro)),
		},
		{
			name:  "UNAVAILABLE -> ASSIGNING on the same node",
			setup: unavail,
			cmd:   assign(asg(p0, 1, 2)),
			want:  assignResult(pt(p0, 3)),
			check: all(wantPC(p0, stAssigning, 3, 1, rw, hist(2, 1, rw)), bumped(1)),
		},
		{
			name:  "UNAVAILABLE -> ASSIGNING on another node",
			setup: unavail,
			cmd:   assign(asg(p0, 2, 2)),
			want:  assignResult(pt(p0, 3)),
			check: wantPC(p0, stAssigning, 3, 2, rw, hist(2, 1, rw)),
		},
		{
			name:  "several channels: one version bump, only modified ones reported",
			setup: assignedP0,
			cmd:   assign(asg(p0, 1, 2), asg(p1, 2, 1), asg(p2, 3, 1)),
			want:  assignResult(pt(p1, 2), pt(p2, 2)),
			check: all(bumped(1), pcUnchanged(p0), stampedPC(p1, p2),
				wantPC(p1, stAssigning, 2, 2, rw), wantPC(p2, stAssigning, 2, 3, rw)),
		},
		{
			name:  "the last error survives a reassignment",
			setup: base(assign(asg(p0, 1, 1)), assignFailed(p0, 2, "node not match", withProposedAt(555))),
			cmd:   assign(asg(p0, 2, 2)),
			want:  assignResult(pt(p0, 3)),
			check: func(t *testing.T, _, after *State) {
				if p := mustPChannel(t, after, p0); p.LastError != "node not match" || p.FailedAttempts != 1 || p.LastErrorMs != 555 {
					t.Fatalf("p0 lost its failure record: %v", p)
				}
			},
		},
	})
}

// TestApplyAssignPChannelsAllOrNothing: one bad assignment rejects the whole
// command, whatever its position, and nothing changes.
func TestApplyAssignPChannelsAllOrNothing(t *testing.T) {
	setup := base(concat(assigned(p1, 3), []commands.Command{drain(2, true, "op"), register("10.0.0.4:1", "i4"), markDown(4, 0, "gone")})...)
	// Node 1 and 3 are UP, 2 DRAINING, 4 DOWN; p1 ASSIGNED@2 on 3, the rest
	// UNINITIALIZED@1.
	tests := []struct {
		name string
		cmd  commands.Command
		code logpb.RejectCode
		msg  string
	}{
		{"unknown pchannel", assign(asg(p0, 1, 1), asg("dml_9", 1, 1)), logpb.RejectCode_REJECT_NOT_FOUND, "pchannel dml_9 does not exist"},
		{"unknown node", assign(asg(p0, 1, 1), asg(p2, 9, 1)), logpb.RejectCode_REJECT_NOT_FOUND, "streaming node 9 does not exist"},
		{"draining node", assign(asg(p0, 1, 1), asg(p2, 2, 1)), logpb.RejectCode_REJECT_CONFLICT, "streaming node 2 is NODE_DRAINING"},
		{"down node", assign(asg(p0, 4, 1), asg(p2, 1, 1)), logpb.RejectCode_REJECT_CONFLICT, "streaming node 4 is NODE_DOWN"},
		{"expected term too low", assign(asg(p0, 1, 1), asg(p1, 1, 1)), logpb.RejectCode_REJECT_STALE, "pchannel dml_1 is at term 2, the assignment expected 1"},
		{"expected term too high", assign(asg(p1, 1, 3), asg(p0, 1, 1)), logpb.RejectCode_REJECT_STALE, "expected 3"},
		{"expected term wrong on a not-modified channel", assign(asg(p0, 1, 1), asg(p1, 3, 1)), logpb.RejectCode_REJECT_STALE, "expected 1"},
		{"bad shape", assign(asg(p0, 1, 1), asg(p2, 0, 1)), logpb.RejectCode_REJECT_INVALID, "has no node"},
	}
	var cases []applyCase
	for _, tt := range tests {
		cases = append(cases, applyCase{name: tt.name, setup: setup, cmd: tt.cmd, want: rejected(tt.code), wantMsg: tt.msg})
	}
	runApplyCases(t, cases)

	// The same, as two logs: one with the bad command, one without. Later
	// commands see exactly the same channel view.
	suffix := []commands.Command{assign(asg(p0, 1, 1), asg(p2, 3, 1)), done(pt(p0, 2)), unavailable(pt(p1, 2))}
	want := build(t, concat(setup, suffix)...)
	for _, tt := range tests {
		got := build(t, concat(setup, []commands.Command{tt.cmd}, suffix)...)
		if !sameChannelView(got, want) {
			t.Errorf("%s: the rejected command changed the channel view seen by later commands", tt.name)
		}
	}
	if p := mustPChannel(t, want, p0); p.State != stAssigned || p.Term != 2 {
		t.Fatalf("the suffix did not apply: %v", p)
	}
}

func TestApplyAssignPChannelsDone(t *testing.T) {
	failedOnce := base(assign(asg(p0, 1, 1)), assignFailed(p0, 2, "deadline exceeded"), assign(asg(p0, 2, 2)))
	// failedOnce: p0 ASSIGNING@3 on 2, history (1, 2), last error set.
	runApplyCases(t, []applyCase{
		{
			name:  "ASSIGNING at the exact term -> ASSIGNED",
			setup: base(assign(asg(p0, 1, 1))),
			cmd:   cmd(&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{pt(p0, 2)}}, withProposedAt(4242)),
			want:  numberResult(1),
			check: all(wantPC(p0, stAssigned, 2, 1, rw), bumped(1), stampedPC(p0),
				func(t *testing.T, _, after *State) {
					if p := mustPChannel(t, after, p0); p.LastAssignMs != 4242 {
						t.Fatalf("last_assign_ms %d, want the proposal time 4242", p.LastAssignMs)
					}
				}),
		},
		{
			name:  "clears histories and the failure record",
			setup: failedOnce,
			cmd:   done(pt(p0, 3)),
			want:  numberResult(1),
			check: all(wantPC(p0, stAssigned, 3, 2, rw),
				func(t *testing.T, before, after *State) {
					if b := mustPChannel(t, before, p0); len(b.Histories) != 1 || b.LastError == "" || b.FailedAttempts != 1 {
						t.Fatalf("setup did not leave a history and a failure: %v", b)
					}
					if p := mustPChannel(t, after, p0); p.LastError != "" || p.LastErrorMs != 0 || p.FailedAttempts != 0 {
						t.Fatalf("failure record not cleared: %v", p)
					}
				}),
		},
		{
			name:      "stale term changes nothing",
			setup:     failedOnce,
			cmd:       done(pt(p0, 2)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "future term changes nothing",
			setup:     base(assign(asg(p0, 1, 1))),
			cmd:       done(pt(p0, 3)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "repeat on an ASSIGNED channel changes nothing",
			setup:     base(assigned(p0, 1)...),
			cmd:       done(pt(p0, 2)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "UNINITIALIZED channel changes nothing",
			setup:     base(),
			cmd:       done(pt(p0, 1)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "UNAVAILABLE channel changes nothing",
			setup:     base(append(assigned(p0, 1), unavailable(pt(p0, 2)))...),
			cmd:       done(pt(p0, 2)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:  "several channels: one bump, stale ones skipped",
			setup: base(assign(asg(p0, 1, 1), asg(p1, 2, 1), asg(p2, 3, 1))),
			cmd:   done(pt(p0, 2), pt(p1, 1), pt(p2, 2)),
			want:  numberResult(2),
			check: all(bumped(1), stampedPC(p0, p2), pcUnchanged(p1),
				wantPC(p0, stAssigned, 2, 1, rw), wantPC(p2, stAssigned, 2, 3, rw)),
		},
		{
			name:    "unknown pchannel rejects the whole command",
			setup:   base(assign(asg(p0, 1, 1))),
			cmd:     done(pt(p0, 2), pt("dml_9", 2)),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "pchannel dml_9 does not exist",
		},
		{
			name:  "term 0 is invalid",
			setup: base(assign(asg(p0, 1, 1))),
			cmd:   done(pt(p0, 0)),
			want:  rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

func TestApplyMarkPChannelsUnavailable(t *testing.T) {
	assignedP0 := base(assigned(p0, 1)...)
	runApplyCases(t, []applyCase{
		{
			name:  "ASSIGNED at the current term -> UNAVAILABLE",
			setup: assignedP0,
			cmd:   cmd(&logpb.MarkPChannelsUnavailable{Channels: []*logpb.PChannelTerm{ptr(p0, 2, "wrong streaming node")}}, withProposedAt(777)),
			want:  numberResult(1),
			check: all(wantPC(p0, stUnavailable, 2, 1, rw), bumped(1), stampedPC(p0),
				func(t *testing.T, _, after *State) {
					if p := mustPChannel(t, after, p0); p.LastError != "wrong streaming node" || p.LastErrorMs != 777 {
						t.Fatalf("error not recorded: %v", p)
					}
				}),
		},
		{
			name:      "stale term is ignored",
			setup:     base(concat(assigned(p0, 1), []commands.Command{assign(asg(p0, 2, 2)), done(pt(p0, 3))})...),
			cmd:       unavailable(pt(p0, 2)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "future term is ignored",
			setup:     assignedP0,
			cmd:       unavailable(pt(p0, 3)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "ASSIGNING at the current term is not ASSIGNED",
			setup:     base(assign(asg(p0, 1, 1))),
			cmd:       unavailable(pt(p0, 2)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "UNINITIALIZED is ignored",
			setup:     base(),
			cmd:       unavailable(pt(p0, 1)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "repeat is ignored",
			setup:     base(append(assigned(p0, 1), unavailable(pt(p0, 2)))...),
			cmd:       unavailable(pt(p0, 2)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:  "several channels: one bump",
			setup: base(concat(assigned(p0, 1), assigned(p1, 2))...),
			cmd:   unavailable(pt(p0, 2), pt(p1, 2), pt(p2, 1)),
			want:  numberResult(2),
			check: all(bumped(1), stampedPC(p0, p1), pcUnchanged(p2),
				wantPC(p0, stUnavailable, 2, 1, rw), wantPC(p1, stUnavailable, 2, 2, rw)),
		},
		{
			name:  "unknown pchannel rejects the whole command",
			setup: assignedP0,
			cmd:   unavailable(pt(p0, 2), pt("dml_9", 1)),
			want:  rejected(logpb.RejectCode_REJECT_NOT_FOUND),
		},
	})
}

func TestApplyRecordAssignFailure(t *testing.T) {
	assigning := base(assign(asg(p0, 1, 1)))
	wantFailure := func(reason string, at int64, attempts uint32) checkFn {
		return func(t *testing.T, before, after *State) {
			p := mustPChannel(t, after, p0)
			if p.LastError != reason || p.LastErrorMs != at || p.FailedAttempts != attempts {
				t.Fatalf("failure record %q at %d, %d attempts; want %q at %d, %d", p.LastError, p.LastErrorMs, p.FailedAttempts, reason, at, attempts)
			}
			// Not an assignment change: same version, same stamp, same placement.
			b := mustPChannel(t, before, p0)
			if p.VersionGlobal != b.VersionGlobal || p.VersionLocal != b.VersionLocal || p.State != b.State || p.Term != b.Term || p.NodeId != b.NodeId {
				t.Fatalf("failure record changed the assignment: %v -> %v", b, p)
			}
		}
	}
	runApplyCases(t, []applyCase{
		{
			name:  "ASSIGNING at the current term",
			setup: assigning,
			cmd:   assignFailed(p0, 2, "deadline exceeded", withProposedAt(900)),
			want:  okResult(),
			check: all(wantFailure("deadline exceeded", 900, 1), bumped(0)),
		},
		{
			name:  "attempts accumulate",
			setup: concat(assigning, []commands.Command{assignFailed(p0, 2, "first", withProposedAt(900))}),
			cmd:   assignFailed(p0, 2, "second", withProposedAt(901)),
			want:  okResult(),
			check: all(wantFailure("second", 901, 2), bumped(0)),
		},
		{
			name:    "stale term",
			setup:   base(assign(asg(p0, 1, 1)), assign(asg(p0, 2, 2))),
			cmd:     assignFailed(p0, 2, "late"),
			want:    rejected(logpb.RejectCode_REJECT_STALE),
			wantMsg: "not ASSIGNING at 2",
		},
		{
			name:  "ASSIGNED channel",
			setup: base(assigned(p0, 1)...),
			cmd:   assignFailed(p0, 2, "late"),
			want:  rejected(logpb.RejectCode_REJECT_STALE),
		},
		{
			name:  "UNINITIALIZED channel",
			setup: base(),
			cmd:   assignFailed(p0, 1, "x"),
			want:  rejected(logpb.RejectCode_REJECT_STALE),
		},
		{
			name:  "unknown pchannel",
			setup: assigning,
			cmd:   assignFailed("dml_9", 2, "x"),
			want:  rejected(logpb.RejectCode_REJECT_NOT_FOUND),
		},
		{
			name:  "reason over 1024 bytes is invalid",
			setup: assigning,
			cmd:   assignFailed(p0, 2, string(make([]byte, vocab.MaxReasonBytes+1))),
			want:  rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

// TestPChannelHistoryCompaction reproduces Milvus' TestPChannel (history
// compaction, docs/semantics.md#pchannel-assignment) with nodes 1, 2, 3
// standing for 456, 789, 790.
func TestPChannelHistoryCompaction(t *testing.T) {
	const n456, n789, n790 = 1, 2, 3
	s := build(t, base()...)
	step := func(c commands.Command, want *logpb.Result, check checkFn) {
		t.Helper()
		next, r := mustApply(t, s, c)
		checkResult(t, r[0], want, "")
		check(t, s, next)
		s = next
	}
	step(assign(asg(p0, n456, 1)), assignResult(pt(p0, 2)), wantPC(p0, stAssigning, 2, n456, rw))
	step(assign(asg(p0, n789, 2)), assignResult(pt(p0, 3)), wantPC(p0, stAssigning, 3, n789, rw, hist(2, n456, rw)))
	step(done(pt(p0, 3)), numberResult(1), wantPC(p0, stAssigned, 3, n789, rw))
	step(assign(asg(p0, n789, 3)), assignResult(), wantPC(p0, stAssigned, 3, n789, rw))
	step(unavailable(pt(p0, 2)), numberResult(0), wantPC(p0, stAssigned, 3, n789, rw))
	step(unavailable(pt(p0, 3)), numberResult(1), wantPC(p0, stUnavailable, 3, n789, rw))

	// Repeated reassignments between 789 and 790 keep one entry per node,
	// with the newest term each could hold.
	step(assign(asg(p0, n789, 3)), assignResult(pt(p0, 4)), wantPC(p0, stAssigning, 4, n789, rw, hist(3, n789, rw)))
	step(assign(asg(p0, n790, 4)), assignResult(pt(p0, 5)), wantPC(p0, stAssigning, 5, n790, rw, hist(4, n789, rw)))
	step(assign(asg(p0, n789, 5)), assignResult(pt(p0, 6)), wantPC(p0, stAssigning, 6, n789, rw, hist(4, n789, rw), hist(5, n790, rw)))
	for term := int64(6); term < 12; term++ {
		next := uint64(n790)
		if term%2 == 1 {
			next = n789
		}
		step(assign(asg(p0, next, term)), assignResult(pt(p0, term+1)), func(t *testing.T, _, after *State) {
			p := mustPChannel(t, after, p0)
			if len(p.Histories) != 2 {
				t.Fatalf("term %d: %d histories %v, want 2", p.Term, len(p.Histories), p.Histories)
			}
			// The node just moved away from holds the previous term.
			for _, h := range p.Histories {
				if h.NodeId != next && h.Term != p.Term-1 {
					t.Fatalf("term %d: history %v, want term %d for node %d", p.Term, h, p.Term-1, h.NodeId)
				}
			}
		})
	}
	// A different mode on the same node is a separate placement.
	step(assign(asgMode(p0, n789, ro, 12)), assignResult(pt(p0, 13)), func(t *testing.T, _, after *State) {
		if p := mustPChannel(t, after, p0); len(p.Histories) != 2 {
			t.Fatalf("histories %v", p.Histories)
		}
	})
	step(assign(asg(p0, n456, 13)), assignResult(pt(p0, 14)), func(t *testing.T, _, after *State) {
		p := mustPChannel(t, after, p0)
		want := []*logpb.PChannelHistory{hist(12, n789, rw), hist(11, n790, rw), hist(13, n789, ro)}
		if len(p.Histories) != len(want) {
			t.Fatalf("histories %v, want %v", p.Histories, want)
		}
		for i := range want {
			if !proto.Equal(p.Histories[i], want[i]) {
				t.Fatalf("histories %v, want %v", p.Histories, want)
			}
		}
	})
	step(done(pt(p0, 14)), numberResult(1), wantPC(p0, stAssigned, 14, n456, rw))
}
