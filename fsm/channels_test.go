package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// ---- channel command builders and fixtures ------------------------------------

const clusterID = "by-dev"

var (
	p0 = vocab.PChannelName("dml", 0)
	p1 = vocab.PChannelName("dml", 1)
	p2 = vocab.PChannelName("dml", 2)
	p3 = vocab.PChannelName("dml", 3)
)

const (
	rw = logpb.AccessMode_ACCESS_RW
	ro = logpb.AccessMode_ACCESS_RO

	stUninit      = logpb.PChannelState_PCHANNEL_UNINITIALIZED
	stAssigning   = logpb.PChannelState_PCHANNEL_ASSIGNING
	stAssigned    = logpb.PChannelState_PCHANNEL_ASSIGNED
	stUnavailable = logpb.PChannelState_PCHANNEL_UNAVAILABLE

	nodeUp       = logpb.NodeState_NODE_UP
	nodeDraining = logpb.NodeState_NODE_DRAINING
	nodeDown     = logpb.NodeState_NODE_DOWN
)

func initStreaming(cluster string, pchannels ...string) commands.Command {
	return cmd(&logpb.InitStreaming{ClusterId: cluster, Pchannels: pchannels})
}

func addPCh(pchannels ...string) commands.Command {
	return cmd(&logpb.AddPChannels{Pchannels: pchannels})
}

// asg is one assignment in RW mode.
func asg(p string, node uint64, expectedTerm int64) *logpb.PChannelAssignment {
	return &logpb.PChannelAssignment{Pchannel: p, NodeId: node, Mode: rw, ExpectedTerm: expectedTerm}
}

func asgMode(p string, node uint64, mode logpb.AccessMode, expectedTerm int64) *logpb.PChannelAssignment {
	return &logpb.PChannelAssignment{Pchannel: p, NodeId: node, Mode: mode, ExpectedTerm: expectedTerm}
}

func assign(as ...*logpb.PChannelAssignment) commands.Command {
	return cmd(&logpb.AssignPChannels{Assignments: as})
}

func pt(p string, term int64) *logpb.PChannelTerm {
	return &logpb.PChannelTerm{Pchannel: p, Term: term}
}

func ptr(p string, term int64, reason string) *logpb.PChannelTerm {
	return &logpb.PChannelTerm{Pchannel: p, Term: term, Reason: reason}
}

func done(items ...*logpb.PChannelTerm) commands.Command {
	return cmd(&logpb.AssignPChannelsDone{Channels: items})
}

func unavailable(items ...*logpb.PChannelTerm) commands.Command {
	return cmd(&logpb.MarkPChannelsUnavailable{Channels: items})
}

func assignFailed(p string, term int64, reason string, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.RecordAssignFailure{Channel: ptr(p, term, reason)}, opts...)
}

func register(addr, incarnation string, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.RegisterStreamingNode{Address: addr, Incarnation: incarnation}, opts...)
}

func registerReplacing(addr, incarnation string, replace uint64) commands.Command {
	return cmd(&logpb.RegisterStreamingNode{Address: addr, Incarnation: incarnation, ReplaceNodeId: replace})
}

func markDown(id, epoch uint64, reason string) commands.Command {
	return cmd(&logpb.MarkStreamingNodeDown{NodeId: id, Epoch: epoch, Reason: reason})
}

func drain(id uint64, draining bool, reason string) commands.Command {
	return cmd(&logpb.SetStreamingNodeDrain{NodeId: id, Draining: draining, Reason: reason})
}

func allocV(coll int64, count uint32) commands.Command {
	return cmd(&logpb.AllocVirtualChannels{CollectionId: coll, Count: count})
}

func dropV(coll int64) commands.Command { return cmd(&logpb.DropVirtualChannels{CollectionId: coll}) }

func rcluster(id string, pchannels ...string) *logpb.ReplicateCluster {
	return &logpb.ReplicateCluster{ClusterId: id, Pchannels: pchannels}
}

func edge(src, dst string) *logpb.ReplicateTopology {
	return &logpb.ReplicateTopology{SourceClusterId: src, TargetClusterId: dst}
}

func replicate(clusters []*logpb.ReplicateCluster, topology ...*logpb.ReplicateTopology) commands.Command {
	return cmd(&logpb.UpdateReplicateConfiguration{Config: &logpb.ReplicateConfiguration{Clusters: clusters, Topology: topology}})
}

// Node addresses of the base fixture.
const (
	addr1 = "10.0.0.1:22222"
	addr2 = "10.0.0.2:22222"
	addr3 = "10.0.0.3:22222"
)

// base: a leader established in term 2, nodes 1..3 registered (at log
// indexes 2..4, so those are their epochs) and streaming initialized with
// p0..p3 (UNINITIALIZED at term 1).
func base(more ...commands.Command) []commands.Command {
	return append([]commands.Command{
		leaderEstablished(2, "c1", withProposedAt(100)),
		register(addr1, "i1", withProposedAt(101)),
		register(addr2, "i2", withProposedAt(102)),
		register(addr3, "i3", withProposedAt(103)),
		initStreaming(clusterID, p0, p1, p2, p3),
	}, more...)
}

// assigned: p assigned to node at term 2 (from UNINITIALIZED).
func assigned(p string, node uint64) []commands.Command {
	return []commands.Command{assign(asg(p, node, 1)), done(pt(p, 2))}
}

func concat(parts ...[]commands.Command) []commands.Command {
	var out []commands.Command
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// ---- results and checks ---------------------------------------------------------

func assignResult(items ...*logpb.PChannelTerm) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_Assign{Assign: &logpb.AssignResult{Assigned: items}}}
}

func regResult(id, epoch uint64, v AssignmentVersion) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_RegisterNode{RegisterNode: &logpb.RegisterNodeResult{
		NodeId: id, Epoch: epoch, Version: v.Proto()}}}
}

func vchannelsResult(names ...string) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_Vchannels{Vchannels: &logpb.VChannelList{Vchannels: names}}}
}

type checkFn = func(t *testing.T, before, after *State)

func all(fs ...checkFn) checkFn {
	return func(t *testing.T, before, after *State) {
		t.Helper()
		for _, f := range fs {
			f(t, before, after)
		}
	}
}

func mustPChannel(t testing.TB, s *State, name string) *logpb.PChannelRecord {
	t.Helper()
	p, ok := s.PChannel(name)
	if !ok {
		t.Fatalf("pchannel %s does not exist", name)
	}
	return p
}

func mustNode(t testing.TB, s *State, id uint64) *logpb.StreamingNodeRecord {
	t.Helper()
	n, ok := s.StreamingNode(id)
	if !ok {
		t.Fatalf("streaming node %d does not exist", id)
	}
	return n
}

func hist(term int64, node uint64, mode logpb.AccessMode) *logpb.PChannelHistory {
	return &logpb.PChannelHistory{Term: term, NodeId: node, Mode: mode}
}

// wantPC checks a pchannel's assignment fields (histories in order).
func wantPC(name string, state logpb.PChannelState, term int64, node uint64, mode logpb.AccessMode, hs ...*logpb.PChannelHistory) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		p := mustPChannel(t, after, name)
		if p.State != state || p.Term != term || p.NodeId != node || p.Mode != mode {
			t.Fatalf("pchannel %s is %s term %d node %d %s; want %s term %d node %d %s",
				name, p.State, p.Term, p.NodeId, p.Mode, state, term, node, mode)
		}
		if len(p.Histories) != len(hs) {
			t.Fatalf("pchannel %s histories %v, want %v", name, p.Histories, hs)
		}
		for i := range hs {
			if !proto.Equal(p.Histories[i], hs[i]) {
				t.Fatalf("pchannel %s histories %v, want %v", name, p.Histories, hs)
			}
		}
	}
}

// pcUnchanged: the pchannel record is identical before and after.
func pcUnchanged(name string) checkFn {
	return func(t *testing.T, before, after *State) {
		t.Helper()
		if b, a := mustPChannel(t, before, name), mustPChannel(t, after, name); !proto.Equal(b, a) {
			t.Fatalf("pchannel %s changed:\n before %v\n after  %v", name, b, a)
		}
	}
}

// bumped: the assignment version grew by exactly n within the same Global.
func bumped(n uint64) checkFn {
	return func(t *testing.T, before, after *State) {
		t.Helper()
		b, a := before.AssignmentVersion(), after.AssignmentVersion()
		if a.Global != b.Global || a.Local != b.Local+n {
			t.Fatalf("assignment version %v -> %v, want +%d", b, a, n)
		}
	}
}

// stampedPC: the pchannel record carries the current version.
func stampedPC(names ...string) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		v := after.AssignmentVersion()
		for _, name := range names {
			p := mustPChannel(t, after, name)
			if p.VersionGlobal != v.Global || p.VersionLocal != v.Local {
				t.Fatalf("pchannel %s stamped (%d, %d), want %v", name, p.VersionGlobal, p.VersionLocal, v)
			}
		}
	}
}

func stampedNode(ids ...uint64) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		v := after.AssignmentVersion()
		for _, id := range ids {
			n := mustNode(t, after, id)
			if n.VersionGlobal != v.Global || n.VersionLocal != v.Local {
				t.Fatalf("node %d stamped (%d, %d), want %v", id, n.VersionGlobal, n.VersionLocal, v)
			}
		}
	}
}

func pchannelNames(s *State) []string {
	var out []string
	for _, p := range s.PChannels() {
		out = append(out, p.Name)
	}
	return out
}

func wantPChannelNames(names ...string) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		if got := pchannelNames(after); fmt.Sprint(got) != fmt.Sprint(names) {
			t.Fatalf("pchannels %v, want %v", got, names)
		}
	}
}

// channelView is the channel subsystem's observable content (everything a
// snapshot holds for it) as one comparable message list.
func channelView(s *State) []proto.Message {
	out := []proto.Message{s.ChannelsMeta(), s.AssignmentVersion().Proto()}
	for _, p := range s.PChannels() {
		out = append(out, p)
	}
	for _, n := range s.StreamingNodes() {
		out = append(out, n)
	}
	for _, c := range s.Collections() {
		out = append(out, c)
	}
	return out
}

func sameChannelView(a, b *State) bool { return equalRecords(channelView(a), channelView(b)) }

// restore round-trips s through a snapshot and checks the bytes are stable.
func restore(t rapid.TB, s *State) *State {
	t.Helper()
	data := snapshotBytes(t, s)
	r, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if !bytes.Equal(snapshotBytes(t, r), data) {
		t.Fatal("snapshot -> restore -> snapshot changed the bytes")
	}
	return r
}

// ---- InitStreaming / AddPChannels ---------------------------------------------------

func TestApplyInitStreaming(t *testing.T) {
	leader := leaderEstablished(2, "c1")
	runApplyCases(t, []applyCase{
		{
			name:  "creates uninitialized channels and binds the cchannel to the first",
			setup: []commands.Command{leader},
			cmd:   initStreaming(clusterID, p1, p0, p2),
			want:  okResult(),
			check: all(
				wantPChannelNames(p0, p1, p2),
				wantPC(p0, stUninit, 1, 0, rw),
				wantPC(p1, stUninit, 1, 0, rw),
				wantPC(p2, stUninit, 1, 0, rw),
				bumped(0), // unassigned channels are not an observable change
				func(t *testing.T, before, after *State) {
					if before.StreamingInitialized() || !after.StreamingInitialized() {
						t.Fatal("StreamingInitialized did not go from false to true")
					}
					if got, want := after.CChannel(), vocab.CChannelName(p1); got != want {
						t.Fatalf("cchannel %q, want %q (the first listed pchannel)", got, want)
					}
					if after.ChannelsMeta().ClusterId != clusterID {
						t.Fatalf("cluster id %q", after.ChannelsMeta().ClusterId)
					}
				},
			),
		},
		{
			name:  "repeat with the same cluster only adds missing channels",
			setup: concat([]commands.Command{leader, register(addr1, "i1"), initStreaming(clusterID, p0, p1)}, assigned(p0, 1)),
			cmd:   initStreaming(clusterID, p2, p1, p0),
			want:  numberResult(1),
			check: all(
				wantPChannelNames(p0, p1, p2),
				pcUnchanged(p0), pcUnchanged(p1),
				wantPC(p0, stAssigned, 2, 1, rw),
				wantPC(p2, stUninit, 1, 0, rw),
				bumped(0),
				func(t *testing.T, _, after *State) {
					if got := after.CChannel(); got != vocab.CChannelName(p0) {
						t.Fatalf("cchannel moved to %q", got)
					}
				},
			),
		},
		{
			name:      "repeat with nothing new is a no-op",
			setup:     []commands.Command{leader, initStreaming(clusterID, p0, p1)},
			cmd:       initStreaming(clusterID, p1),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:    "another cluster id conflicts",
			setup:   []commands.Command{leader, initStreaming(clusterID, p0)},
			cmd:     initStreaming("other", p0, p1),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: `already initialized for cluster "by-dev", not "other"`,
		},
		{
			name: "bad pchannel name is invalid",
			cmd:  initStreaming(clusterID, p0, "p_01"),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
		{
			name: "no pchannels is invalid",
			cmd:  initStreaming(clusterID),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
		{
			name:    "too many pchannels is exhausted",
			prep:    fillPChannels(MaxPChannels-1, false),
			cmd:     initStreaming(clusterID, p0, p1),
			want:    rejected(logpb.RejectCode_REJECT_EXHAUSTED),
			wantMsg: "would exceed 65536",
		},
	})
}

// fillPChannels puts n UNINITIALIZED pchannels named fill_<i> straight into
// the state; initialized also marks streaming initialized.
func fillPChannels(n int, initialized bool) func(s *State) {
	return func(s *State) {
		b := s.ch.pchannels
		for i := 0; i < n; i++ {
			name := vocab.PChannelName("fill", i)
			b = b.Set(name, &logpb.PChannelRecord{Name: name, Term: 1, State: stUninit})
		}
		s.ch.pchannels = b
		if initialized {
			s.setMeta(func(m *logpb.ChannelsMeta) {
				m.Initialized, m.ClusterId, m.Cchannel = true, clusterID, vocab.CChannelName(vocab.PChannelName("fill", 0))
			})
		}
	}
}

func TestApplyAddPChannels(t *testing.T) {
	runApplyCases(t, []applyCase{
		{
			name:    "before InitStreaming conflicts",
			setup:   []commands.Command{leaderEstablished(2, "c1")},
			cmd:     addPCh(p0),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "not initialized",
		},
		{
			name:  "adds new channels without bumping the version",
			setup: base(),
			cmd:   addPCh(vocab.PChannelName("dml", 10), vocab.PChannelName("dml", 4)),
			want:  numberResult(2),
			check: all(
				wantPChannelNames(p0, p1, vocab.PChannelName("dml", 10), p2, p3, vocab.PChannelName("dml", 4)),
				wantPC(vocab.PChannelName("dml", 10), stUninit, 1, 0, rw),
				wantPC(vocab.PChannelName("dml", 4), stUninit, 1, 0, rw),
				bumped(0),
			),
		},
		{
			name:  "existing channels are kept as they are",
			setup: base(concat(assigned(p0, 1), []commands.Command{assign(asg(p1, 2, 1))})...),
			cmd:   addPCh(p0, p1, vocab.PChannelName("dml", 4)),
			want:  numberResult(1),
			check: all(pcUnchanged(p0), pcUnchanged(p1), bumped(0), wantPC(p1, stAssigning, 2, 2, rw)),
		},
		{
			name:      "repeat is a no-op",
			setup:     base(addPCh(vocab.PChannelName("dml", 4))),
			cmd:       addPCh(vocab.PChannelName("dml", 4), p0),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name: "duplicate is invalid",
			cmd:  addPCh(p0, p0),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
		{
			name:  "up to the limit",
			prep:  fillPChannels(MaxPChannels-1, true),
			setup: []commands.Command{addPCh(vocab.PChannelName("fill", 0))},
			cmd:   addPCh(vocab.PChannelName("fill", 0), p0),
			want:  numberResult(1),
		},
		{
			name:    "over the limit is exhausted",
			prep:    fillPChannels(MaxPChannels-1, true),
			cmd:     addPCh(p0, p1),
			want:    rejected(logpb.RejectCode_REJECT_EXHAUSTED),
			wantMsg: "adding 2 pchannels would exceed 65536",
		},
	})
}

// ---- assignment versions ---------------------------------------------------------------

// TestAssignmentVersionPerCommand: every command that changes the channel
// view bumps Local by exactly one, however many records it touches, and
// stamps them with the new version; commands that change nothing
// observable leave it alone.
func TestAssignmentVersionPerCommand(t *testing.T) {
	ready := base(concat(assigned(p0, 1), assigned(p1, 2), []commands.Command{
		assign(asg(p2, 3, 1)), allocV(7, 2),
	})...)
	// ready: p0 ASSIGNED@2 on node 1, p1 ASSIGNED@2 on node 2, p2 ASSIGNING@2
	// on node 3, p3 UNINITIALIZED; collection 7 has vchannels on p0 and p1.
	tests := []struct {
		name  string
		cmd   commands.Command
		bump  uint64
		check checkFn
	}{
		{"register", register("10.0.0.9:1", "i9"), 1, stampedNode(4)},
		{"register replacing a node", registerReplacing(addr3, "i3b", 3), 1, stampedNode(3, 4)},
		{"mark down", markDown(2, 0, "ttl"), 1, stampedNode(2)},
		{"drain", drain(1, true, "op"), 1, stampedNode(1)},
		{"assign two channels", assign(asg(p2, 1, 2), asg(p3, 1, 1)), 1, stampedPC(p2, p3)},
		{"assign, one of them not modified", assign(asg(p0, 1, 2), asg(p1, 3, 2)), 1, all(stampedPC(p1), pcUnchanged(p0))},
		{"done", done(pt(p2, 2)), 1, stampedPC(p2)},
		{"unavailable, two channels", unavailable(pt(p0, 2), pt(p1, 2)), 1, stampedPC(p0, p1)},
		{"alloc", allocV(8, 1), 1, nil},
		{"drop", dropV(7), 1, nil},
		{"replicate config", replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p1, p2, p3)}), 1, nil},

		{"add pchannels", addPCh(vocab.PChannelName("dml", 9)), 0, nil},
		{"init again", initStreaming(clusterID, vocab.PChannelName("dml", 9)), 0, nil},
		{"record assign failure", assignFailed(p2, 2, "boom"), 0, nil},
		{"assign not modified", assign(asg(p0, 1, 2)), 0, nil},
		{"done at a stale term", done(pt(p2, 1)), 0, nil},
		{"done on an assigned channel", done(pt(p0, 2)), 0, nil},
		{"unavailable at a stale term", unavailable(pt(p0, 1)), 0, nil},
		{"register repeat", register(addr1, "i1"), 0, nil},
		{"undrain a node that is not draining", drain(1, false, ""), 0, nil},
		{"alloc repeat", allocV(7, 2), 0, nil},
		{"rejected assign", assign(asg(p0, 1, 1)), 0, nil},
		{"rejected register", register(addr1, "other"), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, ready...)
			next, _ := mustApply(t, s, tt.cmd)
			bumped(tt.bump)(t, s, next)
			if tt.bump == 0 {
				// Nothing observable changed: every record kept its stamp.
				for _, p := range s.PChannels() {
					np := mustPChannel(t, next, p.Name)
					if np.VersionGlobal != p.VersionGlobal || np.VersionLocal != p.VersionLocal {
						t.Fatalf("pchannel %s restamped without a version bump", p.Name)
					}
				}
			}
			if tt.check != nil {
				tt.check(t, s, next)
			}
		})
	}
}

// TestAssignmentVersionAcrossLeaders: Global is the established term; a new
// leader resets Local to 0, records keep the version of their last change.
func TestAssignmentVersionAcrossLeaders(t *testing.T) {
	s := build(t, leaderEstablished(2, "c1"))
	want := func(s *State, g, l uint64) {
		t.Helper()
		if v := s.AssignmentVersion(); v != (AssignmentVersion{Global: g, Local: l}) {
			t.Fatalf("assignment version %v, want (%d, %d)", v, g, l)
		}
	}
	want(s, 2, 0)
	s, r := mustApply(t, s, register(addr1, "i1"))
	want(s, 2, 1)
	checkResult(t, r[0], regResult(1, 2, AssignmentVersion{2, 1}), "")
	if n := mustNode(t, s, 1); !proto.Equal(n.RegisteredVersion, AssignmentVersion{2, 1}.Proto()) || n.VersionGlobal != 2 || n.VersionLocal != 1 {
		t.Fatalf("node 1 record %v, want registered and stamped at (2, 1)", n)
	}
	s, _ = mustApply(t, s, initStreaming(clusterID, p0, p1))
	s, _ = mustApply(t, s, assign(asg(p0, 1, 1)))
	want(s, 2, 2)
	s, _ = mustApply(t, s, done(pt(p0, 2)))
	want(s, 2, 3)

	// The same term again changes nothing.
	again, _ := mustApply(t, s, leaderEstablished(2, "c2"))
	sameExceptApplied(t, s, again)

	s, _ = mustApply(t, s, leaderEstablished(5, "c2"))
	want(s, 5, 0)
	if p := mustPChannel(t, s, p0); p.VersionGlobal != 2 || p.VersionLocal != 3 {
		t.Fatalf("p0 stamped (%d, %d), want its last change (2, 3)", p.VersionGlobal, p.VersionLocal)
	}
	if !(AssignmentVersion{2, 3}).Less(s.AssignmentVersion()) {
		t.Fatal("the new leader's version does not order after the old one")
	}
	s, _ = mustApply(t, s, assign(asg(p1, 1, 1)))
	want(s, 5, 1)
	if p := mustPChannel(t, s, p1); p.VersionGlobal != 5 || p.VersionLocal != 1 {
		t.Fatalf("p1 stamped (%d, %d), want (5, 1)", p.VersionGlobal, p.VersionLocal)
	}
	// A stale leader's command is refused, so it cannot stamp an old Global.
	_, r = mustApply(t, s, cmd(&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{asg(p0, 1, 2)}}, withTerm(4)))
	checkResult(t, r[0], rejected(logpb.RejectCode_REJECT_STALE), "proposed in term 4")
}

func TestAssignmentVersionOrder(t *testing.T) {
	tests := []struct {
		a, b AssignmentVersion
		less bool
	}{
		{AssignmentVersion{1, 5}, AssignmentVersion{2, 0}, true},
		{AssignmentVersion{2, 0}, AssignmentVersion{2, 1}, true},
		{AssignmentVersion{2, 1}, AssignmentVersion{2, 1}, false},
		{AssignmentVersion{2, 1}, AssignmentVersion{2, 0}, false},
		{AssignmentVersion{3, 0}, AssignmentVersion{2, 9}, false},
	}
	for _, tt := range tests {
		if got := tt.a.Less(tt.b); got != tt.less {
			t.Errorf("%v.Less(%v) = %v, want %v", tt.a, tt.b, got, tt.less)
		}
		if got := VersionOf(tt.a.Proto()); got != tt.a {
			t.Errorf("VersionOf(Proto(%v)) = %v", tt.a, got)
		}
	}
	if VersionOf(nil) != (AssignmentVersion{}) {
		t.Error("VersionOf(nil) is not the zero version")
	}
}

// TestChannelRecordsImmutable: channel records handed out by a state never
// change, whatever is applied to that state afterwards.
func TestChannelRecordsImmutable(t *testing.T) {
	held := populated(t)
	want := snapshotBytes(t, held)
	var clones []proto.Message
	for _, m := range channelView(held) {
		clones = append(clones, proto.Clone(m))
	}
	shared := channelView(held)

	s := held
	apply := func(round int, cmds ...commands.Command) {
		t.Helper()
		next, results, err := s.ApplyCommands(s.AppliedIndex()+1, cmds...)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range results {
			if r.Rejection != nil {
				t.Fatalf("round %d command %d rejected: %v", round, j, r.Rejection)
			}
		}
		s = next
	}
	for i := 0; i < 5; i++ {
		live := s.liveNodeAt(addr1).Id
		var as []*logpb.PChannelAssignment
		for _, p := range s.PChannels() {
			as = append(as, asg(p.Name, live, p.Term))
		}
		apply(i, assign(as...))
		var terms []*logpb.PChannelTerm
		for _, p := range s.PChannels() {
			terms = append(terms, pt(p.Name, p.Term))
		}
		apply(i,
			assignFailed(p3, mustPChannel(t, s, p3).Term, "x"),
			done(terms...),
			unavailable(terms...),
			registerReplacing(addr1, fmt.Sprintf("i1-%d", i), live),
			drain(2, i%2 == 0, "flip"),
			allocV(int64(100+i), 2),
			dropV(int64(100+i)),
			addPCh(vocab.PChannelName("dml", 10+i)),
			leaderEstablished(uint64(10+i), "c9"),
		)
	}
	apply(5, markDown(2, 0, "gone"), dropV(7))
	if !bytes.Equal(snapshotBytes(t, held), want) {
		t.Fatal("the held state changed")
	}
	for i := range clones {
		if !proto.Equal(shared[i], clones[i]) {
			t.Fatalf("a record handed out by the held state changed:\n was %v\n now %v", clones[i], shared[i])
		}
	}
	if sameChannelView(s, held) {
		t.Fatal("the derived state did not change anything")
	}
}
