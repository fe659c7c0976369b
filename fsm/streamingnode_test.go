package fsm

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// wantNode checks a node's identity and state.
func wantNode(id uint64, addr, incarnation string, epoch uint64, state logpb.NodeState) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		n := mustNode(t, after, id)
		if n.Address != addr || n.Incarnation != incarnation || n.Epoch != epoch || n.State != state {
			t.Fatalf("node %d is %s/%s epoch %d %s; want %s/%s epoch %d %s",
				id, n.Address, n.Incarnation, n.Epoch, n.State, addr, incarnation, epoch, state)
		}
	}
}

func wantNodeReason(id uint64, reason string) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		if n := mustNode(t, after, id); n.Reason != reason {
			t.Fatalf("node %d reason %q, want %q", id, n.Reason, reason)
		}
	}
}

func wantNextNodeID(id uint64) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		if got := after.ChannelsMeta().NextNodeId; got != id {
			t.Fatalf("next node id %d, want %d", got, id)
		}
	}
}

func TestApplyRegisterStreamingNode(t *testing.T) {
	leader := leaderEstablished(2, "c1")
	// In every case below the command under test is applied at index
	// len(setup)+1, which becomes the new node's epoch.
	runApplyCases(t, []applyCase{
		{
			name:  "first node gets id 1 and the log index as epoch",
			setup: []commands.Command{leader},
			cmd:   cmd(&logpb.RegisterStreamingNode{Address: addr1, Incarnation: "i1", ResourceGroup: "rg1"}, withProposedAt(5000)),
			want:  regResult(1, 2, AssignmentVersion{2, 1}),
			check: all(wantNode(1, addr1, "i1", 2, nodeUp), wantNextNodeID(2), bumped(1), stampedNode(1),
				func(t *testing.T, _, after *State) {
					n := mustNode(t, after, 1)
					if n.ResourceGroup != "rg1" || n.RegisteredMs != 5000 || !proto.Equal(n.RegisteredVersion, AssignmentVersion{2, 1}.Proto()) {
						t.Fatalf("node record %v", n)
					}
				}),
		},
		{
			name:  "the registering credential's node identity is kept",
			setup: []commands.Command{leader},
			cmd:   cmd(&logpb.RegisterStreamingNode{Address: addr1, Incarnation: "i1", BoundNode: 7}),
			want:  regResult(1, 2, AssignmentVersion{2, 1}),
			check: func(t *testing.T, _, after *State) {
				if n := mustNode(t, after, 1); n.BoundNode != 7 {
					t.Fatalf("bound_node %d, want 7", n.BoundNode)
				}
			},
		},
		{
			name:      "a retry from the same identity returns the first answer",
			setup:     []commands.Command{leader, cmd(&logpb.RegisterStreamingNode{Address: addr1, Incarnation: "i1", BoundNode: 7})},
			cmd:       cmd(&logpb.RegisterStreamingNode{Address: addr1, Incarnation: "i1", BoundNode: 7}),
			want:      regResult(1, 2, AssignmentVersion{2, 1}),
			unchanged: true,
		},
		{
			name:    "a retry from another identity conflicts",
			setup:   []commands.Command{leader, cmd(&logpb.RegisterStreamingNode{Address: addr1, Incarnation: "i1", BoundNode: 7})},
			cmd:     cmd(&logpb.RegisterStreamingNode{Address: addr1, Incarnation: "i1", BoundNode: 8}),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "of node identity 7, not 8",
		},
		{
			name:  "default resource group",
			setup: []commands.Command{leader},
			cmd:   register(addr1, "i1"),
			want:  regResult(1, 2, AssignmentVersion{2, 1}),
			check: func(t *testing.T, _, after *State) {
				if rg := mustNode(t, after, 1).ResourceGroup; rg != DefaultResourceGroup {
					t.Fatalf("resource group %q, want %q", rg, DefaultResourceGroup)
				}
			},
		},
		{
			name:  "ids are sequential",
			setup: []commands.Command{leader, register(addr1, "i1"), register(addr2, "i2")},
			cmd:   register(addr3, "i3"),
			want:  regResult(3, 4, AssignmentVersion{2, 3}),
			check: all(wantNode(3, addr3, "i3", 4, nodeUp), wantNextNodeID(4)),
		},
		{
			name:      "retry by the same process returns the first answer",
			setup:     []commands.Command{leader, register(addr1, "i1"), register(addr2, "i2")},
			cmd:       register(addr1, "i1"),
			want:      regResult(1, 2, AssignmentVersion{2, 1}),
			unchanged: true,
		},
		{
			name:      "retry while draining returns the first answer",
			setup:     []commands.Command{leader, register(addr1, "i1"), drain(1, true, "op")},
			cmd:       register(addr1, "i1"),
			want:      regResult(1, 2, AssignmentVersion{2, 1}),
			unchanged: true,
		},
		{
			name:    "another process at a live node's address conflicts",
			setup:   []commands.Command{leader, register(addr1, "i1")},
			cmd:     register(addr1, "i1-restarted"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "held by live streaming node 1 (incarnation i1)",
		},
		{
			name:  "another process at a draining node's address conflicts",
			setup: []commands.Command{leader, register(addr1, "i1"), drain(1, true, "op")},
			cmd:   register(addr1, "i1-restarted"),
			want:  rejected(logpb.RejectCode_REJECT_CONFLICT),
		},
		{
			name:    "replace_node_id naming another node conflicts",
			setup:   []commands.Command{leader, register(addr1, "i1"), register(addr2, "i2")},
			cmd:     registerReplacing(addr1, "i1-restarted", 2),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "held by live streaming node 1",
		},
		{
			name:  "replace_node_id naming the holder takes the address over",
			setup: []commands.Command{leader, register(addr1, "i1"), register(addr2, "i2")},
			cmd:   registerReplacing(addr1, "i1-restarted", 1),
			want:  regResult(3, 4, AssignmentVersion{2, 3}),
			check: all(
				wantNode(1, addr1, "i1", 2, nodeDown), wantNodeReason(1, "replaced by incarnation i1-restarted"),
				wantNode(3, addr1, "i1-restarted", 4, nodeUp), wantNode(2, addr2, "i2", 3, nodeUp),
				bumped(1), stampedNode(1, 3), wantNextNodeID(4),
			),
		},
		{
			name:  "the address of a DOWN node is free",
			setup: []commands.Command{leader, register(addr1, "i1"), markDown(1, 2, "ttl")},
			cmd:   register(addr1, "i1-restarted"),
			want:  regResult(2, 4, AssignmentVersion{2, 3}),
			check: all(wantNode(1, addr1, "i1", 2, nodeDown), wantNode(2, addr1, "i1-restarted", 4, nodeUp)),
		},
		{
			name:  "the same incarnation after being marked down gets a new id",
			setup: []commands.Command{leader, register(addr1, "i1"), markDown(1, 2, "ttl")},
			cmd:   register(addr1, "i1"),
			want:  regResult(2, 4, AssignmentVersion{2, 3}),
			check: wantNode(2, addr1, "i1", 4, nodeUp),
		},
		{
			name:  "replace_node_id with a free address just registers",
			setup: []commands.Command{leader, register(addr1, "i1")},
			cmd:   registerReplacing(addr2, "i2", 1),
			want:  regResult(2, 3, AssignmentVersion{2, 2}),
			check: all(wantNode(1, addr1, "i1", 2, nodeUp), wantNode(2, addr2, "i2", 3, nodeUp)),
		},
		{
			name: "bad address is invalid",
			cmd:  register("nohost", "i1"),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
		{
			name: "no incarnation is invalid",
			cmd:  register(addr1, ""),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

// TestStreamingNodeIDsNeverReused: IDs keep growing across downs,
// replacements and evictions.
func TestStreamingNodeIDsNeverReused(t *testing.T) {
	s := build(t, leaderEstablished(2, "c1"))
	seen := map[uint64]bool{}
	reg := func(c commands.Command) uint64 {
		t.Helper()
		var r []*logpb.Result
		s, r = mustApply(t, s, c)
		id := r[0].GetRegisterNode().GetNodeId()
		if id == 0 || seen[id] {
			t.Fatalf("registration got id %d (seen before: %v)", id, seen[id])
		}
		seen[id] = true
		return id
	}
	a := reg(register(addr1, "a"))
	b := reg(registerReplacing(addr1, "b", a))
	s, _ = mustApply(t, s, markDown(b, 0, "gone"))
	c := reg(register(addr1, "a")) // the first incarnation again
	if a != 1 || b != 2 || c != 3 {
		t.Fatalf("ids %d %d %d, want 1 2 3", a, b, c)
	}
}

func TestApplyMarkStreamingNodeDown(t *testing.T) {
	two := []commands.Command{leaderEstablished(2, "c1"), register(addr1, "i1"), register(addr2, "i2")}
	// Node 1 has epoch 2, node 2 epoch 3.
	runApplyCases(t, []applyCase{
		{
			name:  "matching epoch",
			setup: two,
			cmd:   markDown(1, 2, "heartbeat ttl"),
			want:  okResult(),
			check: all(wantNode(1, addr1, "i1", 2, nodeDown), wantNodeReason(1, "heartbeat ttl"),
				wantNode(2, addr2, "i2", 3, nodeUp), bumped(1), stampedNode(1)),
		},
		{
			name:  "epoch 0 matches any registration",
			setup: two,
			cmd:   markDown(2, 0, "deregistered"),
			want:  okResult(),
			check: all(wantNode(2, addr2, "i2", 3, nodeDown), bumped(1)),
		},
		{
			name:  "a draining node goes down",
			setup: append(append([]commands.Command{}, two...), drain(1, true, "op")),
			cmd:   markDown(1, 2, "ttl"),
			want:  okResult(),
			check: wantNode(1, addr1, "i1", 2, nodeDown),
		},
		{
			name:    "wrong epoch is stale",
			setup:   two,
			cmd:     markDown(1, 3, "late"),
			want:    rejected(logpb.RejectCode_REJECT_STALE),
			wantMsg: "streaming node 1 has epoch 2, not 3",
		},
		{
			name:    "unknown node",
			setup:   two,
			cmd:     markDown(9, 0, ""),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "streaming node 9 does not exist",
		},
		{
			name:      "down twice is a no-op",
			setup:     append(append([]commands.Command{}, two...), markDown(1, 2, "first")),
			cmd:       markDown(1, 2, "second"),
			want:      okResult(),
			unchanged: true,
			check:     wantNodeReason(1, "first"),
		},
		{
			name: "node id 0 is invalid",
			cmd:  markDown(0, 1, ""),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

func TestApplySetStreamingNodeDrain(t *testing.T) {
	two := []commands.Command{leaderEstablished(2, "c1"), register(addr1, "i1"), register(addr2, "i2")}
	with := func(more ...commands.Command) []commands.Command {
		return append(append([]commands.Command{}, two...), more...)
	}
	runApplyCases(t, []applyCase{
		{
			name:  "drain a live node",
			setup: two,
			cmd:   drain(1, true, "upgrade"),
			want:  okResult(),
			check: all(wantNode(1, addr1, "i1", 2, nodeDraining), wantNodeReason(1, "upgrade"), bumped(1), stampedNode(1)),
		},
		{
			name:  "undrain",
			setup: with(drain(1, true, "upgrade")),
			cmd:   drain(1, false, "done"),
			want:  okResult(),
			check: all(wantNode(1, addr1, "i1", 2, nodeUp), wantNodeReason(1, "done"), bumped(1)),
		},
		{
			name:      "drain twice is a no-op",
			setup:     with(drain(1, true, "upgrade")),
			cmd:       drain(1, true, "again"),
			want:      okResult(),
			unchanged: true,
		},
		{
			name:      "undrain a node that is up is a no-op",
			setup:     two,
			cmd:       drain(1, false, ""),
			want:      okResult(),
			unchanged: true,
		},
		{
			name:    "drain a DOWN node conflicts",
			setup:   with(markDown(1, 0, "gone")),
			cmd:     drain(1, true, ""),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "streaming node 1 is down",
		},
		{
			name:  "undrain a DOWN node conflicts",
			setup: with(markDown(1, 0, "gone")),
			cmd:   drain(1, false, ""),
			want:  rejected(logpb.RejectCode_REJECT_CONFLICT),
		},
		{
			name:  "unknown node",
			setup: two,
			cmd:   drain(7, true, ""),
			want:  rejected(logpb.RejectCode_REJECT_NOT_FOUND),
		},
	})
}

// applyBatches applies cmds in entries of at most MaxCommandsPerEntry
// commands and fails on any rejection.
func applyBatches(t *testing.T, s *State, cmds []commands.Command) *State {
	t.Helper()
	for len(cmds) > 0 {
		n := min(len(cmds), commands.MaxCommandsPerEntry)
		next, results, err := s.ApplyCommands(s.AppliedIndex()+1, cmds[:n]...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range results {
			if r.Rejection != nil {
				t.Fatalf("command %d rejected: %v", i, r.Rejection)
			}
		}
		s, cmds = next, cmds[n:]
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDownNodeEviction: at most MaxDownNodes DOWN records are kept; the
// oldest are evicted and the delta floor moves to the evicting version.
func TestDownNodeEviction(t *testing.T) {
	const total = MaxDownNodes + 2
	var regs, downs []commands.Command
	for i := 1; i <= total; i++ {
		regs = append(regs, register(fmt.Sprintf("10.1.%d.%d:1", i/256, i%256), "i"))
	}
	for i := 1; i <= MaxDownNodes; i++ {
		downs = append(downs, markDown(uint64(i), 0, "gone"))
	}
	s := applyBatches(t, build(t, leaderEstablished(2, "c1")), append(regs, downs...))
	if got := len(s.StreamingNodes()); got != total {
		t.Fatalf("%d node records, want %d", got, total)
	}
	if f := s.DeltaFloor(); f != (AssignmentVersion{}) {
		t.Fatalf("delta floor %v before any eviction", f)
	}

	// One more DOWN node: node 1, the oldest, is evicted.
	next, _ := mustApply(t, s, markDown(MaxDownNodes+1, 0, "gone"))
	if _, ok := next.StreamingNode(1); ok {
		t.Fatal("node 1 was not evicted")
	}
	if _, ok := next.StreamingNode(2); !ok {
		t.Fatal("node 2 was evicted too")
	}
	if got := len(next.StreamingNodes()); got != total-1 {
		t.Fatalf("%d node records, want %d", got, total-1)
	}
	if f, v := next.DeltaFloor(), next.AssignmentVersion(); f != v || !s.AssignmentVersion().Less(f) {
		t.Fatalf("delta floor %v, want the evicting version %v", f, v)
	}
	// A report about the evicted node finds nothing; a new registration
	// gets a fresh id, never 1.
	_, r := mustApply(t, next, markDown(1, 0, "late"))
	checkResult(t, r[0], rejected(logpb.RejectCode_REJECT_NOT_FOUND), "")
	after, r := mustApply(t, next, register("10.9.9.9:1", "new"))
	if id := r[0].GetRegisterNode().GetNodeId(); id != total+1 {
		t.Fatalf("new node id %d, want %d", id, total+1)
	}
	// Registering pushes nothing out: the new node is UP.
	if len(after.StreamingNodes()) != total {
		t.Fatalf("%d node records after registering", len(after.StreamingNodes()))
	}
	// The floor survives a snapshot.
	if r := restore(t, next); r.DeltaFloor() != next.DeltaFloor() {
		t.Fatalf("restored delta floor %v, want %v", r.DeltaFloor(), next.DeltaFloor())
	}
}

// TestDownNodeEvictionByReplacement: a replacing registration also evicts.
func TestDownNodeEvictionByReplacement(t *testing.T) {
	var cmds []commands.Command
	for i := 1; i <= MaxDownNodes; i++ {
		cmds = append(cmds, register(fmt.Sprintf("10.1.%d.%d:1", i/256, i%256), "i"), markDown(uint64(i), 0, "gone"))
	}
	cmds = append(cmds, register(addr1, "a"))
	s := applyBatches(t, build(t, leaderEstablished(2, "c1")), cmds)
	next, r := mustApply(t, s, registerReplacing(addr1, "b", MaxDownNodes+1))
	checkResult(t, r[0], regResult(MaxDownNodes+2, next.AppliedIndex(), next.AssignmentVersion()), "")
	if _, ok := next.StreamingNode(1); ok {
		t.Fatal("node 1 was not evicted")
	}
	if next.DeltaFloor() != next.AssignmentVersion() {
		t.Fatalf("delta floor %v, want %v", next.DeltaFloor(), next.AssignmentVersion())
	}
}
