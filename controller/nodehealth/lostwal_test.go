package nodehealth

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/fsm"
	cdtest "github.com/coordd/coordd/testutil"
)

// judgeHeld is a pure function of the assigned channels, the heartbeat's
// list and the runs of misses so far: one miss is forgiven, the second in
// a row is a lost WAL; a listing at the right term ends a run; a channel
// that moved on (another term, not assigned here) starts afresh.
func TestJudgeHeldForgivesOneMissAndJudgesTheSecond(t *testing.T) {
	type beat struct {
		assigned, held map[string]int64
		wantLost       []string // "pchannel:reason"
	}
	tests := []struct {
		name  string
		beats []beat
	}{
		{"held at the term: never lost", []beat{
			{map[string]int64{"a": 2}, map[string]int64{"a": 2}, nil},
			{map[string]int64{"a": 2}, map[string]int64{"a": 2}, nil},
		}},
		{"missing twice in a row: lost", []beat{
			{map[string]int64{"a": 2, "b": 3}, map[string]int64{"b": 3}, nil},
			{map[string]int64{"a": 2, "b": 3}, map[string]int64{"b": 3}, []string{"a:missing"}},
		}},
		{"an in-flight Assign: one miss, then listed", []beat{
			{map[string]int64{"a": 2}, map[string]int64{}, nil},
			{map[string]int64{"a": 2}, map[string]int64{"a": 2}, nil},
			{map[string]int64{"a": 2}, map[string]int64{}, nil},
		}},
		{"listed at an older term twice: lost", []beat{
			{map[string]int64{"a": 5}, map[string]int64{"a": 4}, nil},
			{map[string]int64{"a": 5}, map[string]int64{"a": 4}, []string{"a:stale_term"}},
		}},
		{"the channel moves to a new term between misses: starts afresh", []beat{
			{map[string]int64{"a": 2}, map[string]int64{}, nil},
			{map[string]int64{"a": 3}, map[string]int64{}, nil},
			{map[string]int64{"a": 3}, map[string]int64{}, []string{"a:missing"}},
		}},
		{"the channel moves away between misses: forgotten", []beat{
			{map[string]int64{"a": 2}, map[string]int64{}, nil},
			{map[string]int64{}, map[string]int64{}, nil},
			{map[string]int64{"a": 2}, map[string]int64{}, nil},
		}},
		{"a WAL held but not assigned here is no concern", []beat{
			{nil, map[string]int64{"z": 9}, nil},
			{nil, map[string]int64{"z": 9}, nil},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			misses := map[string]miss{}
			for i, b := range tc.beats {
				var got []string
				for _, l := range judgeHeld(b.assigned, b.held, misses) {
					got = append(got, l.pchannel+":"+l.reason)
				}
				if !reflect.DeepEqual(got, b.wantLost) {
					t.Fatalf("heartbeat %d: lost %v, want %v", i+1, got, b.wantLost)
				}
			}
		})
	}
}

// lostFixture: a real FSM under a fake leader in term 3, node 1 holding
// dml_0 and dml_1 ASSIGNED at term 2.
func lostFixture(t *testing.T) (*Tracker, *controllertest.Leader, *logpb.StreamingNodeRecord, *Metrics) {
	t.Helper()
	clock := controllertest.NewClock()
	l := controllertest.NewLeader(t, clock, 3)
	n := register(t, l, "10.0.0.1:1001")
	l.MustPropose(t, &logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0", "dml_1"}})
	l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: "dml_0", NodeId: n.Id, ExpectedTerm: 1}, {Pchannel: "dml_1", NodeId: n.Id, ExpectedTerm: 1}}})
	l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}, {Pchannel: "dml_1", Term: 2}}})
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	tr := New(l, Config{TTL: ttl, Clock: clock, Metrics: m})
	startRun(t, tr, clock, 3)
	return tr, l, n, m
}

func pstate(t *testing.T, l *controllertest.Leader, name string) *logpb.PChannelRecord {
	t.Helper()
	p, ok := l.State().PChannel(name)
	if !ok {
		t.Fatalf("pchannel %s missing", name)
	}
	return p
}

// TestLostWALIsMarkedUnavailable: an owner whose heartbeats stop listing
// an ASSIGNED channel has it marked UNAVAILABLE at that term (so the
// balancer reassigns it) after the second such heartbeat, with the
// leader's decision term, the reason in the channel's last error and the
// metric; the channel it still lists stays ASSIGNED.
func TestLostWALIsMarkedUnavailable(t *testing.T) {
	tr, l, n, m := lostFixture(t)
	seen := fsm.VersionOf(n.RegisteredVersion)
	both := map[string]int64{"dml_0": 2, "dml_1": 2}
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, both, 0)
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, map[string]int64{"dml_1": 2}, 0) // dml_0 gone: forgiven once
	if len(controllertest.AppliedOf[*logpb.MarkPChannelsUnavailable](l)) != 0 {
		t.Fatal("marked after a single heartbeat without the channel")
	}
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, map[string]int64{"dml_1": 2}, 0)
	cdtest.Eventually(t, "dml_0 to be marked UNAVAILABLE", func() bool {
		return pstate(t, l, "dml_0").State == logpb.PChannelState_PCHANNEL_UNAVAILABLE
	})
	marks := controllertest.AppliedOf[*logpb.MarkPChannelsUnavailable](l)
	if len(marks) != 1 || len(marks[0].Channels) != 1 || marks[0].Channels[0].Pchannel != "dml_0" || marks[0].Channels[0].Term != 2 {
		t.Fatalf("marks %v", marks)
	}
	terms := l.DecisionTerms()
	if terms[len(terms)-1] != 3 {
		t.Fatalf("the mark was decided in term %d, want the leader's term 3", terms[len(terms)-1])
	}
	if p := pstate(t, l, "dml_0"); p.Term != 2 || p.LastError == "" {
		t.Fatalf("dml_0 after the mark: %v", p)
	}
	if p := pstate(t, l, "dml_1"); p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
		t.Fatalf("dml_1, still listed, is %v", p.State)
	}
	if got := testutil.ToFloat64(m.LostWALs.WithLabelValues(LostMissing)); got != 1 {
		t.Fatalf("coordd_pchannel_lost_wal_total{reason=missing} = %v, want 1", got)
	}
	// More heartbeats without it change nothing more (it is not ASSIGNED).
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, map[string]int64{"dml_1": 2}, 0)
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, map[string]int64{"dml_1": 2}, 0)
	tr.markLost(l.Deadline(), l)
	if got := len(controllertest.AppliedOf[*logpb.MarkPChannelsUnavailable](l)); got != 1 {
		t.Fatalf("%d marks, want 1", got)
	}
}

// TestHeartbeatsWithoutHeldAreNotJudged: a node that does not report its
// WALs (an older or another streaming node) never has a channel taken
// away by it; a new leader (Reset) starts every run of misses afresh.
func TestHeartbeatsWithoutHeldAreNotJudged(t *testing.T) {
	tr, l, n, _ := lostFixture(t)
	seen := fsm.VersionOf(n.RegisteredVersion)
	for range 5 {
		tr.Heartbeat(n.Id, n.Epoch, seen)
	}
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, map[string]int64{}, 0)
	tr.Reset()
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, map[string]int64{}, 0)
	tr.markLost(l.Deadline(), l)
	if marks := controllertest.AppliedOf[*logpb.MarkPChannelsUnavailable](l); len(marks) != 0 {
		t.Fatalf("marked without two reported misses in one leadership: %v", marks)
	}
	if p := pstate(t, l, "dml_0"); p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
		t.Fatalf("dml_0 is %v", p.State)
	}
}

// TestLostJudgementOfAMovedChannelChangesNothing: a judgement queued for a
// term the channel has left (it was reassigned meanwhile) is dropped.
func TestLostJudgementOfAMovedChannelChangesNothing(t *testing.T) {
	clock := controllertest.NewClock()
	l := controllertest.NewLeader(t, clock, 3)
	n := register(t, l, "10.0.0.1:1001")
	l.MustPropose(t, &logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0"}})
	l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "dml_0", NodeId: n.Id, ExpectedTerm: 1}}})
	l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}}})
	tr := New(l, Config{TTL: ttl, Clock: clock}) // not running: markLost is called by hand
	tr.Reset()
	seen := fsm.VersionOf(n.RegisteredVersion)
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, map[string]int64{}, 0)
	tr.HeartbeatHeld(n.Id, n.Epoch, seen, map[string]int64{}, 0)
	// The channel moves on (term 3, another node) before the judgement is
	// proposed.
	n2 := register(t, l, "10.0.0.2:1002")
	l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "dml_0", NodeId: n2.Id, ExpectedTerm: 2}}})
	if p := pstate(t, l, "dml_0"); p.Term != 3 {
		t.Fatalf("dml_0 did not move: %v", p)
	}
	tr.markLost(l.Deadline(), l)
	if marks := controllertest.AppliedOf[*logpb.MarkPChannelsUnavailable](l); len(marks) != 0 {
		t.Fatalf("a stale judgement was proposed: %v", marks)
	}
}
