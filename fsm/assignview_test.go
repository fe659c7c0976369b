package fsm

import (
	"fmt"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

func changeNames(ch AssignmentChanges) (nodes []uint64, pchannels []string) {
	for _, n := range ch.Nodes {
		nodes = append(nodes, n.Id)
	}
	for _, p := range ch.PChannels {
		pchannels = append(pchannels, p.Name)
	}
	return nodes, pchannels
}

func TestAssignmentChangesSince(t *testing.T) {
	// Versions along the way (Global 2):
	//   (2,3) after base()'s registrations; init does not bump
	//   (2,4) assign p0, p1
	//   (2,5) done p0
	//   (2,6) node 3 down
	//   (2,7) drain node 2
	s := build(t, base(assign(asg(p0, 1, 1), asg(p1, 2, 1)), done(pt(p0, 2)), markDown(3, 0, "gone"), drain(2, true, "op"))...)
	if v := s.AssignmentVersion(); v != (AssignmentVersion{2, 7}) {
		t.Fatalf("fixture at version %v, want (2, 7)", v)
	}
	tests := []struct {
		name      string
		from      AssignmentVersion
		hasFrom   bool
		full      bool
		nodes     []uint64
		pchannels []string
	}{
		{"no version held", AssignmentVersion{}, false, true, []uint64{1, 2}, []string{p0, p1, p2, p3}},
		{"older global", AssignmentVersion{1, 9}, true, true, []uint64{1, 2}, []string{p0, p1, p2, p3}},
		{"ahead of this replica", AssignmentVersion{2, 8}, true, true, []uint64{1, 2}, []string{p0, p1, p2, p3}},
		{"newer global", AssignmentVersion{3, 0}, true, true, []uint64{1, 2}, []string{p0, p1, p2, p3}},
		{"current", AssignmentVersion{2, 7}, true, false, nil, nil},
		{"one behind", AssignmentVersion{2, 6}, true, false, []uint64{2}, nil},
		{"down nodes are reported in deltas", AssignmentVersion{2, 5}, true, false, []uint64{2, 3}, nil},
		{"pchannel changes", AssignmentVersion{2, 3}, true, false, []uint64{2, 3}, []string{p0, p1}},
		{"from the start of the term", AssignmentVersion{2, 0}, true, false, []uint64{1, 2, 3}, []string{p0, p1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := s.AssignmentChangesSince(tt.from, tt.hasFrom)
			if ch.Full != tt.full || ch.Version != s.AssignmentVersion() {
				t.Fatalf("full=%v version %v; want full=%v version %v", ch.Full, ch.Version, tt.full, s.AssignmentVersion())
			}
			nodes, pchannels := changeNames(ch)
			if fmt.Sprint(nodes) != fmt.Sprint(tt.nodes) || fmt.Sprint(pchannels) != fmt.Sprint(tt.pchannels) {
				t.Fatalf("nodes %v pchannels %v; want %v %v", nodes, pchannels, tt.nodes, tt.pchannels)
			}
		})
	}

	// A new leader starts a new Global: every older version needs a full view.
	s2, _ := mustApply(t, s, leaderEstablished(3, "c2"))
	if ch := s2.AssignmentChangesSince(AssignmentVersion{2, 7}, true); !ch.Full {
		t.Fatal("a version of the previous leader got a delta")
	}
	if ch := s2.AssignmentChangesSince(AssignmentVersion{3, 0}, true); ch.Full || len(ch.Nodes)+len(ch.PChannels) != 0 {
		t.Fatalf("current version of the new leader: %+v", ch)
	}
	s3, _ := mustApply(t, s2, assign(asg(p2, 1, 1)))
	if _, ps := changeNames(s3.AssignmentChangesSince(AssignmentVersion{3, 0}, true)); fmt.Sprint(ps) != fmt.Sprint([]string{p2}) {
		t.Fatalf("delta after the new leader's first change: %v", ps)
	}
}

// TestAssignmentChangesBelowDeltaFloor: once DOWN records were evicted, a
// watcher older than the eviction gets a full view.
func TestAssignmentChangesBelowDeltaFloor(t *testing.T) {
	var cmds []commands.Command
	for i := 1; i <= MaxDownNodes+1; i++ {
		cmds = append(cmds, register(fmt.Sprintf("10.1.%d.%d:1", i/256, i%256), "i"))
	}
	for i := 1; i <= MaxDownNodes; i++ {
		cmds = append(cmds, markDown(uint64(i), 0, "gone"))
	}
	s := applyBatches(t, build(t, leaderEstablished(2, "c1")), cmds)
	before := s.AssignmentVersion()
	s, _ = mustApply(t, s, markDown(MaxDownNodes+1, 0, "gone")) // evicts node 1
	floor := s.DeltaFloor()
	if ch := s.AssignmentChangesSince(before, true); !ch.Full {
		t.Fatal("a version below the delta floor got a delta")
	}
	if ch := s.AssignmentChangesSince(floor, true); ch.Full {
		t.Fatal("the delta floor itself needs no full view")
	}
	if ch := s.AssignmentChangesSince(before, true); len(ch.Nodes) != 0 {
		t.Fatalf("the full view lists %d nodes, but every node is DOWN", len(ch.Nodes))
	}
}

// assignView is what a watcher holds: live nodes and every pchannel, in the
// projection deltas promise to keep current (observablePC).
type assignView struct {
	nodes     map[uint64]*logpb.StreamingNodeRecord
	pchannels map[string]*logpb.PChannelRecord
}

func fullView(s *State) assignView {
	ch := s.AssignmentChangesSince(AssignmentVersion{}, false)
	v := assignView{nodes: map[uint64]*logpb.StreamingNodeRecord{}, pchannels: map[string]*logpb.PChannelRecord{}}
	for _, n := range ch.Nodes {
		v.nodes[n.Id] = n
	}
	for _, p := range ch.PChannels {
		v.pchannels[p.Name] = p
	}
	return v
}

// applyChanges is a watcher applying a delta to the view it holds.
func (v assignView) applyChanges(ch AssignmentChanges) assignView {
	out := assignView{nodes: map[uint64]*logpb.StreamingNodeRecord{}, pchannels: map[string]*logpb.PChannelRecord{}}
	for id, n := range v.nodes {
		out.nodes[id] = n
	}
	for name, p := range v.pchannels {
		out.pchannels[name] = p
	}
	for _, n := range ch.Nodes {
		if n.State == logpb.NodeState_NODE_DOWN {
			delete(out.nodes, n.Id)
		} else {
			out.nodes[n.Id] = n
		}
	}
	for _, p := range ch.PChannels {
		out.pchannels[p.Name] = p
	}
	return out
}

// diffViews compares two views: nodes exactly, pchannels in the observable
// projection, ignoring channels never assigned (AddPChannels does not bump
// the version, so a delta cannot carry them).
func diffViews(got, want assignView) string {
	if len(got.nodes) != len(want.nodes) {
		return fmt.Sprintf("%d nodes, want %d", len(got.nodes), len(want.nodes))
	}
	for id, n := range want.nodes {
		if !proto.Equal(got.nodes[id], n) {
			return fmt.Sprintf("node %d: %v, want %v", id, got.nodes[id], n)
		}
	}
	var names []string
	for name, p := range want.pchannels {
		if p.State != logpb.PChannelState_PCHANNEL_UNINITIALIZED {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		g, ok := got.pchannels[name]
		if !ok || !proto.Equal(observablePC(g), observablePC(want.pchannels[name])) {
			return fmt.Sprintf("pchannel %s: %v, want %v", name, g, want.pchannels[name])
		}
	}
	return ""
}

// checkDeltas: for every earlier state of a log, the view it would have
// handed a watcher, updated with the delta since its version, equals the
// current full view.
func checkDeltas(t *rapid.T, history []*State, cur *State) {
	want := fullView(cur)
	for _, old := range history {
		ch := cur.AssignmentChangesSince(old.AssignmentVersion(), true)
		if ch.Full {
			if old.AssignmentVersion().Global == cur.AssignmentVersion().Global && !old.AssignmentVersion().Less(cur.DeltaFloor()) {
				t.Fatalf("full view for %v at %v (floor %v)", old.AssignmentVersion(), cur.AssignmentVersion(), cur.DeltaFloor())
			}
			continue
		}
		if d := diffViews(fullView(old).applyChanges(ch), want); d != "" {
			t.Fatalf("view at %v + delta to %v: %s", old.AssignmentVersion(), cur.AssignmentVersion(), d)
		}
	}
}
