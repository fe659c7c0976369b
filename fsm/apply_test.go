package fsm

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// ---- helpers shared by the fsm tests -----------------------------------------

type cmdOpt func(*commands.Command)

func withRequestID(id string) cmdOpt { return func(c *commands.Command) { c.RequestID = id } }
func withTerm(term uint64) cmdOpt    { return func(c *commands.Command) { c.LeaderTerm = term } }
func withProposedAt(ms int64) cmdOpt { return func(c *commands.Command) { c.ProposedAtUnixMs = ms } }
func cmd(body proto.Message, opts ...cmdOpt) commands.Command {
	c := commands.MustNew(body)
	for _, o := range opts {
		o(&c)
	}
	return c
}

func leaderEstablished(term uint64, id string, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.LeaderEstablished{Term: term, LeaderId: id}, opts...)
}

func upsertMember(id, raftAddr string, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.UpsertMember{Member: &logpb.Member{Id: id, RaftAddr: raftAddr}}, opts...)
}

func removeMember(id string, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.RemoveMember{Id: id}, opts...)
}

func extendTSO(limit int64, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.ExtendTSOWindow{LimitPhysicalMs: limit}, opts...)
}

func reserveIDs(count uint64, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.ReserveIDs{Count: count}, opts...)
}

func okResult() *logpb.Result { return &logpb.Result{} }
func numberResult(n uint64) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_Number{Number: n}}
}
func rangeResult(first, count uint64) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_IdRange{IdRange: &logpb.IDRange{First: first, Count: count}}}
}
func rejected(code logpb.RejectCode) *logpb.Result {
	return &logpb.Result{Rejection: &logpb.Rejection{Code: code}}
}

// checkResult compares a result with want. For a rejection only the code is
// compared (messages are for humans); wantMsg, if set, must appear in it.
func checkResult(t testing.TB, got, want *logpb.Result, wantMsg string) {
	t.Helper()
	if got == nil {
		t.Fatalf("result is nil, want %v", want)
	}
	if want.GetRejection() != nil {
		if got.GetRejection().GetCode() != want.GetRejection().GetCode() {
			t.Fatalf("result %v, want rejection %v", got, want.GetRejection().GetCode())
		}
		if got.Value != nil {
			t.Fatalf("rejection carries a value: %v", got)
		}
	} else if !proto.Equal(got, want) {
		t.Fatalf("result %v, want %v", got, want)
	}
	if wantMsg != "" && !strings.Contains(got.GetRejection().GetMessage(), wantMsg) {
		t.Fatalf("rejection message %q does not contain %q", got.GetRejection().GetMessage(), wantMsg)
	}
}

// snapshotBytes is the canonical serialization of a state; equal states give
// equal bytes. It takes rapid.TB so property tests can use it too.
func snapshotBytes(t rapid.TB, s *State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	return buf.Bytes()
}

// mustApply applies cmds as one entry at the next index and checks the
// invariants, the successor relation and that s itself did not change.
func mustApply(t testing.TB, s *State, cmds ...commands.Command) (*State, []*logpb.Result) {
	t.Helper()
	before := snapshotBytes(t, s)
	next, results, err := s.ApplyCommands(s.AppliedIndex()+1, cmds...)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(results) != len(cmds) {
		t.Fatalf("got %d results for %d commands", len(results), len(cmds))
	}
	if err := next.CheckInvariants(); err != nil {
		t.Fatalf("invariants after apply: %v", err)
	}
	if err := Successor(s, next); err != nil {
		t.Fatalf("successor: %v", err)
	}
	if !bytes.Equal(before, snapshotBytes(t, s)) {
		t.Fatal("Apply changed the state it was called on")
	}
	return next, results
}

// build applies each command as its own entry.
func build(t testing.TB, cmds ...commands.Command) *State {
	t.Helper()
	s := New()
	for _, c := range cmds {
		s, _ = mustApply(t, s, c)
	}
	return s
}

// sameExceptApplied fails unless after equals before apart from the applied
// index.
func sameExceptApplied(t testing.TB, before, after *State) {
	t.Helper()
	b := *before
	b.applied = after.applied
	if !bytes.Equal(snapshotBytes(t, &b), snapshotBytes(t, after)) {
		t.Fatal("state changed (beyond the applied index)")
	}
}

// ---- per-command tables -------------------------------------------------------

type applyCase struct {
	name    string
	prep    func(s *State) // optional: adjust the initial state directly
	setup   []commands.Command
	cmd     commands.Command
	want    *logpb.Result
	wantMsg string
	// unchanged: the command succeeds but changes nothing except the
	// applied index (a rejection always implies this).
	unchanged bool
	check     func(t *testing.T, before, after *State)
}

func runApplyCases(t *testing.T, tests []applyCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			if tt.prep != nil {
				tt.prep(s)
			}
			for _, c := range tt.setup {
				s, _ = mustApply(t, s, c)
			}
			next, results := mustApply(t, s, tt.cmd)
			checkResult(t, results[0], tt.want, tt.wantMsg)
			if next.AppliedIndex() != s.AppliedIndex()+1 {
				t.Fatalf("applied index %d, want %d", next.AppliedIndex(), s.AppliedIndex()+1)
			}
			if tt.want.GetRejection() != nil || tt.unchanged {
				sameExceptApplied(t, s, next)
			} else if bytes.Equal(snapshotBytes(t, s), snapshotBytes(t, next)) {
				t.Fatal("an accepted command left the state as it was")
			}
			if tt.check != nil {
				tt.check(t, s, next)
			}
		})
	}
}

func wantLeader(term uint64, id string, at int64) func(t *testing.T, _, after *State) {
	return func(t *testing.T, _, after *State) {
		gotID, gotAt := after.EstablishedLeader()
		if after.EstablishedTerm() != term || gotID != id || gotAt != at {
			t.Fatalf("leader = term %d %q at %d, want term %d %q at %d", after.EstablishedTerm(), gotID, gotAt, term, id, at)
		}
	}
}

func TestApplyLeaderEstablished(t *testing.T) {
	runApplyCases(t, []applyCase{
		{
			name:  "first leader",
			cmd:   leaderEstablished(3, "n1", withProposedAt(1000), withTerm(3)),
			want:  numberResult(3),
			check: wantLeader(3, "n1", 1000),
		},
		{
			name:  "newer term replaces",
			setup: []commands.Command{leaderEstablished(3, "n1", withProposedAt(1000))},
			cmd:   leaderEstablished(5, "n2", withProposedAt(2000), withTerm(5)),
			want:  numberResult(5),
			check: wantLeader(5, "n2", 2000),
		},
		{
			name:      "same term is a no-op",
			setup:     []commands.Command{leaderEstablished(3, "n1", withProposedAt(1000))},
			cmd:       leaderEstablished(3, "n2", withProposedAt(2000), withTerm(3)),
			want:      numberResult(3),
			unchanged: true,
			check:     wantLeader(3, "n1", 1000),
		},
		{
			name:    "older term is stale",
			setup:   []commands.Command{leaderEstablished(5, "n1")},
			cmd:     leaderEstablished(3, "n2"),
			want:    rejected(logpb.RejectCode_REJECT_STALE),
			wantMsg: "older than established term 5",
		},
		{
			name:    "term 0 is invalid",
			cmd:     leaderEstablished(0, "n1"),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "leader term must be positive",
		},
		{
			name: "bad leader id is invalid",
			cmd:  leaderEstablished(1, "no spaces"),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

func wantMembers(ids ...string) func(t *testing.T, _, after *State) {
	return func(t *testing.T, _, after *State) {
		ms := after.Members()
		var got []string
		for _, m := range ms {
			got = append(got, m.Id)
		}
		if strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Fatalf("members %v, want %v", got, ids)
		}
	}
}

func TestApplyUpsertMember(t *testing.T) {
	full := &logpb.Member{Id: "n1", RaftAddr: "127.0.0.1:7001", GrpcAddr: "127.0.0.1:7101", HttpAddr: "127.0.0.1:7201"}
	runApplyCases(t, []applyCase{
		{
			name: "add",
			cmd:  cmd(&logpb.UpsertMember{Member: full}),
			want: okResult(),
			check: func(t *testing.T, before, after *State) {
				wantMembers("n1")(t, before, after)
				if m, ok := after.Member("n1"); !ok || !proto.Equal(m, full) {
					t.Fatalf("Member(n1) = %v, %v; want %v", m, ok, full)
				}
				if _, ok := before.Member("n1"); ok {
					t.Fatal("the previous state sees the new member")
				}
			},
		},
		{
			name:  "replace",
			setup: []commands.Command{cmd(&logpb.UpsertMember{Member: full})},
			cmd:   upsertMember("n1", "10.0.0.1:9000"),
			want:  okResult(),
			check: func(t *testing.T, before, after *State) {
				wantMembers("n1")(t, before, after)
				want := &logpb.Member{Id: "n1", RaftAddr: "10.0.0.1:9000"}
				if m, _ := after.Member("n1"); !proto.Equal(m, want) {
					t.Fatalf("Member(n1) = %v, want %v (a replace drops old fields)", m, want)
				}
				if m, _ := before.Member("n1"); !proto.Equal(m, full) {
					t.Fatalf("the previous state's record changed to %v", m)
				}
			},
		},
		{
			name:  "members stay sorted",
			setup: []commands.Command{upsertMember("n3", "h:3"), upsertMember("n1", "h:1")},
			cmd:   upsertMember("n2", "h:2"),
			want:  okResult(),
			check: wantMembers("n1", "n2", "n3"),
		},
		{
			name:    "missing raft addr is invalid",
			cmd:     upsertMember("n1", ""),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "raft_addr is required",
		},
		{
			name: "missing member is invalid",
			cmd:  cmd(&logpb.UpsertMember{}),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

func TestApplyRemoveMember(t *testing.T) {
	runApplyCases(t, []applyCase{
		{
			name:  "present",
			setup: []commands.Command{upsertMember("n1", "h:1"), upsertMember("n2", "h:2")},
			cmd:   removeMember("n1"),
			want:  okResult(),
			check: func(t *testing.T, before, after *State) {
				wantMembers("n2")(t, before, after)
				wantMembers("n1", "n2")(t, after, before)
			},
		},
		{
			name:      "absent is a no-op",
			setup:     []commands.Command{upsertMember("n2", "h:2")},
			cmd:       removeMember("n1"),
			want:      okResult(),
			unchanged: true,
		},
		{
			name: "bad id is invalid",
			cmd:  removeMember(""),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

func TestApplyExtendTSOWindow(t *testing.T) {
	wantLimit := func(limit int64) func(t *testing.T, _, after *State) {
		return func(t *testing.T, _, after *State) {
			if got := after.TSOLimitPhysicalMs(); got != limit {
				t.Fatalf("TSO limit %d, want %d", got, limit)
			}
		}
	}
	runApplyCases(t, []applyCase{
		{name: "first", cmd: extendTSO(1000), want: numberResult(1000), check: wantLimit(1000)},
		{name: "grow", setup: []commands.Command{extendTSO(1000)}, cmd: extendTSO(1001), want: numberResult(1001), check: wantLimit(1001)},
		{
			name: "equal is stale", setup: []commands.Command{extendTSO(1000)}, cmd: extendTSO(1000),
			want: rejected(logpb.RejectCode_REJECT_STALE), wantMsg: "does not exceed the committed limit 1000",
		},
		{name: "lower is stale", setup: []commands.Command{extendTSO(1000)}, cmd: extendTSO(999), want: rejected(logpb.RejectCode_REJECT_STALE)},
		{name: "zero is invalid", cmd: extendTSO(0), want: rejected(logpb.RejectCode_REJECT_INVALID)},
		{name: "over 46 bits is invalid", cmd: extendTSO(1 << 46), want: rejected(logpb.RejectCode_REJECT_INVALID)},
	})
}

func TestApplyReserveIDs(t *testing.T) {
	wantNext := func(next uint64) func(t *testing.T, _, after *State) {
		return func(t *testing.T, _, after *State) {
			if got := after.NextID(); got != next {
				t.Fatalf("NextID %d, want %d", got, next)
			}
		}
	}
	nearEnd := func(n uint64) func(s *State) { return func(s *State) { s.alloc.nextID = n } }
	runApplyCases(t, []applyCase{
		{name: "first range starts at 1", cmd: reserveIDs(10), want: rangeResult(1, 10), check: wantNext(11)},
		{name: "ranges are consecutive", setup: []commands.Command{reserveIDs(10)}, cmd: reserveIDs(5), want: rangeResult(11, 5), check: wantNext(16)},
		{name: "max count", cmd: reserveIDs(commands.MaxReserveIDs), want: rangeResult(1, commands.MaxReserveIDs), check: wantNext(commands.MaxReserveIDs + 1)},
		{name: "count 0 is invalid", cmd: reserveIDs(0), want: rejected(logpb.RejectCode_REJECT_INVALID)},
		{name: "count over max is invalid", cmd: reserveIDs(commands.MaxReserveIDs + 1), want: rejected(logpb.RejectCode_REJECT_INVALID)},
		{
			name: "last ids", prep: nearEnd(math.MaxUint64 - 10), cmd: reserveIDs(10),
			want: rangeResult(math.MaxUint64-10, 10), check: wantNext(math.MaxUint64),
		},
		{
			name: "overflow is exhausted", prep: nearEnd(math.MaxUint64 - 10), cmd: reserveIDs(11),
			want: rejected(logpb.RejectCode_REJECT_EXHAUSTED), wantMsg: "id space exhausted",
		},
		{name: "nothing left", prep: nearEnd(math.MaxUint64), cmd: reserveIDs(1), want: rejected(logpb.RejectCode_REJECT_EXHAUSTED)},
	})
}

// TestApplyStaleLeaderTerm: once a leader established itself in term 5, any
// command stamped with an older term is rejected as stale and changes nothing.
func TestApplyStaleLeaderTerm(t *testing.T) {
	setup := []commands.Command{leaderEstablished(5, "n1"), upsertMember("n1", "h:1"), extendTSO(100), reserveIDs(3)}
	// Accepted results per type, for the variants that are not stale.
	accepted := map[commands.Type]*logpb.Result{
		commands.TypeLeaderEstablished: numberResult(6),
		commands.TypeUpsertMember:      okResult(),
		commands.TypeRemoveMember:      okResult(),
		commands.TypeExtendTSOWindow:   numberResult(200),
		commands.TypeReserveIDs:        rangeResult(4, 7),
	}
	var tests []applyCase
	for _, c := range []commands.Command{
		leaderEstablished(6, "n2"), // a newer body term does not excuse an old proposer
		upsertMember("n2", "h:2"),
		removeMember("n1"),
		extendTSO(200),
		reserveIDs(7),
	} {
		stale, current, unstamped := c, c, c
		stale.LeaderTerm = 4
		current.LeaderTerm = 5
		tests = append(tests,
			applyCase{
				name: c.Type.String() + "/older term", setup: setup, cmd: stale,
				want: rejected(logpb.RejectCode_REJECT_STALE), wantMsg: "proposed in term 4",
			},
			applyCase{name: c.Type.String() + "/current term", setup: setup, cmd: current, want: accepted[c.Type]},
			applyCase{name: c.Type.String() + "/unstamped term", setup: setup, cmd: unstamped, want: accepted[c.Type]},
		)
	}
	runApplyCases(t, tests)
}

// TestApplyIgnorableUnknown: a skippable command this binary does not know
// succeeds and changes nothing but the applied index.
func TestApplyIgnorableUnknown(t *testing.T) {
	s := build(t, reserveIDs(3), upsertMember("n1", "h:1"))
	unknown := commands.Command{Type: commands.Ignorable | 0x0777, Version: 4, LeaderTerm: 1}
	next, results := mustApply(t, s, unknown)
	checkResult(t, results[0], okResult(), "")
	sameExceptApplied(t, s, next)
}

// TestApplyBatch: commands in one entry apply in order, each with its own
// result, and a rejected command does not stop the others.
func TestApplyBatch(t *testing.T) {
	s, results := mustApply(t, New(),
		reserveIDs(5),
		reserveIDs(0),
		reserveIDs(3),
		extendTSO(50),
		extendTSO(40),
		upsertMember("n1", "h:1"),
		removeMember("n1"),
	)
	want := []*logpb.Result{
		rangeResult(1, 5),
		rejected(logpb.RejectCode_REJECT_INVALID),
		rangeResult(6, 3),
		numberResult(50),
		rejected(logpb.RejectCode_REJECT_STALE),
		okResult(),
		okResult(),
	}
	for i := range want {
		checkResult(t, results[i], want[i], "")
	}
	if s.AppliedIndex() != 1 || s.NextID() != 9 || s.TSOLimitPhysicalMs() != 50 || len(s.Members()) != 0 {
		t.Fatalf("state after batch: applied %d next %d tso %d members %d", s.AppliedIndex(), s.NextID(), s.TSOLimitPhysicalMs(), len(s.Members()))
	}
}

func TestApplyIndexMustGrow(t *testing.T) {
	s := build(t, reserveIDs(1), reserveIDs(1), reserveIDs(1)) // applied = 3
	data, err := commands.EncodeEntry([]commands.Command{reserveIDs(1)})
	if err != nil {
		t.Fatal(err)
	}
	before := snapshotBytes(t, s)
	tests := []struct {
		name    string
		index   uint64
		wantErr bool
	}{
		{"index 0", 0, true},
		{"older index", 2, true},
		{"same index", 3, true},
		{"next index", 4, false},
		{"gap is fine (raft skips configuration entries)", 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, results, err := s.Apply(tt.index, data)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Apply(%d): %v", tt.index, err)
				}
				if next.AppliedIndex() != tt.index {
					t.Fatalf("applied index %d, want %d", next.AppliedIndex(), tt.index)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "already applied up to 3") {
				t.Fatalf("Apply(%d) error = %v, want 'already applied'", tt.index, err)
			}
			if next != nil || results != nil {
				t.Fatalf("Apply(%d) returned a state or results with an error", tt.index)
			}
		})
	}
	if !bytes.Equal(before, snapshotBytes(t, s)) {
		t.Fatal("failed applies changed the state")
	}
}

func TestApplyCorruptEntry(t *testing.T) {
	envelope := func(env *logpb.Envelope) []byte {
		b, err := proto.Marshal(&logpb.Entry{Commands: []*logpb.Envelope{env}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good, err := commands.EncodeEntry([]commands.Command{reserveIDs(1)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		data    []byte
		wantErr error
	}{
		{"garbage", []byte{0xff, 0x00, 0xff}, commands.ErrMalformed},
		{"empty", nil, commands.ErrMalformed},
		{"truncated", good[:len(good)-1], commands.ErrMalformed},
		{"unknown type", envelope(&logpb.Envelope{Type: 0x0777, Version: 1}), commands.ErrUnknownType},
		{"newer version", envelope(&logpb.Envelope{Type: uint32(commands.TypeReserveIDs), Version: 2}), commands.ErrNewerVersion},
		{"version 0", envelope(&logpb.Envelope{Type: uint32(commands.TypeReserveIDs)}), commands.ErrMalformed},
		{"bad body", envelope(&logpb.Envelope{Type: uint32(commands.TypeReserveIDs), Version: 1, Body: []byte{0x08}}), commands.ErrMalformed},
	}
	s := build(t, reserveIDs(2), upsertMember("n1", "h:1"))
	before := snapshotBytes(t, s)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, results, err := s.Apply(s.AppliedIndex()+1, tt.data)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Apply error = %v, want %v", err, tt.wantErr)
			}
			if next != nil || results != nil {
				t.Fatal("Apply returned a state or results with an error")
			}
		})
	}
	if !bytes.Equal(before, snapshotBytes(t, s)) {
		t.Fatal("corrupt entries changed the state")
	}
}

// TestApplyBodyNotAliased: the state does not share the body the caller
// proposed.
func TestApplyBodyNotAliased(t *testing.T) {
	c := upsertMember("n1", "h:1")
	s, _ := mustApply(t, New(), c)
	c.Body.(*logpb.UpsertMember).Member.RaftAddr = "changed:1"
	if m, _ := s.Member("n1"); m.RaftAddr != "h:1" {
		t.Fatalf("state follows the caller's body: %v", m)
	}
}
