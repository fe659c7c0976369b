package grpcserver

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/fsm"
)

// setAges is a NodeHealth whose heartbeat ages are set by the test; every
// node is silent after 2s (the tracker's rule is tested in nodehealth).
type setAges struct {
	mu   sync.Mutex
	ages map[uint64]time.Duration
}

func (a *setAges) HeartbeatHeld(uint64, uint64, fsm.AssignmentVersion, map[string]int64, time.Duration) {
}

func (a *setAges) LastSeen(node uint64) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, ok := a.ages[node]
	return d, ok
}

func (a *setAges) TTL() time.Duration               { return 10 * time.Second }
func (a *setAges) SilentAfter(uint64) time.Duration { return 2 * time.Second }

// On the leader, a live node whose heartbeat is older than its threshold
// is reported silent (with the threshold and the TTL), and each PChannel
// names its owner's state: SILENT, UP or DOWN. A stale read says the same
// here because this member leads; a follower leaves silence unknown.
func TestListsReportSilentOwners(t *testing.T) {
	ages := &setAges{ages: map[uint64]time.Duration{1: 3 * time.Second, 2: 500 * time.Millisecond, 3: 4 * time.Second}}
	tn := startTestNodeCfg(t, routines.Config{Doubles: routines.Doubles{Sessions: ages}})
	for _, body := range []proto.Message{
		&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0", "dml_1", "dml_2", "dml_3"}},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9001", Incarnation: "a"},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9002", Incarnation: "b"},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9003", Incarnation: "c"},
		&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
			{Pchannel: "dml_0", NodeId: 1, ExpectedTerm: 1}, {Pchannel: "dml_1", NodeId: 2, ExpectedTerm: 1},
			{Pchannel: "dml_2", NodeId: 3, ExpectedTerm: 1}}},
		&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}, {Pchannel: "dml_1", Term: 2}, {Pchannel: "dml_2", Term: 2}}},
	} {
		c, err := commands.New(body, "")
		if err != nil {
			t.Fatal(err)
		}
		if res, err := tn.node.Propose(callCtx(t), c); err != nil || res.Rejection != nil {
			t.Fatalf("setup %s: %v %v", c.Type, err, res.GetRejection())
		}
	}
	n3, _ := tn.node.State().StreamingNode(3)
	c, _ := commands.New(&logpb.MarkStreamingNodeDown{NodeId: 3, Epoch: n3.Epoch, Reason: "test"}, "")
	if res, err := tn.node.Propose(callCtx(t), c); err != nil || res.Rejection != nil {
		t.Fatalf("mark node 3 down: %v %v", err, res.GetRejection())
	}
	ch := coordpb.NewChannelsClient(tn.conn)
	for _, cons := range []coordpb.ReadConsistency{coordpb.ReadConsistency_LINEARIZABLE, coordpb.ReadConsistency_STALE} {
		nodes, err := ch.ListNodes(callCtx(t), &coordpb.ListNodesRequest{Consistency: cons, IncludeDown: true})
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint64]bool{1: true, 2: false, 3: false} // 3 is DOWN: past silence
		for _, n := range nodes.Nodes {
			if n.Silent != want[n.Id] || n.SilentAfterMs != 2000 || n.NodeTtlMs != 10000 {
				t.Errorf("%v: node %d (%s, %d ms ago): silent %v after %d ms (TTL %d ms), want silent %v after 2000 ms (TTL 10000 ms)",
					cons, n.Id, n.State, n.LastHeartbeatMsAgo, n.Silent, n.SilentAfterMs, n.NodeTtlMs, want[n.Id])
			}
		}
		pcs, err := ch.ListPChannels(callCtx(t), &coordpb.ListPChannelsRequest{Consistency: cons})
		if err != nil {
			t.Fatal(err)
		}
		wantOwner := map[string]string{"dml_0": "SILENT", "dml_1": "UP", "dml_2": "DOWN", "dml_3": ""}
		for _, p := range pcs.Pchannels {
			if p.OwnerState != wantOwner[p.Name] {
				t.Errorf("%v: %s (node %d): owner state %q, want %q", cons, p.Name, p.NodeId, p.OwnerState, wantOwner[p.Name])
			}
		}
	}
	// Heard from again: no longer silent.
	ages.mu.Lock()
	ages.ages[1] = 0
	ages.mu.Unlock()
	pcs, err := ch.ListPChannels(callCtx(t), &coordpb.ListPChannelsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if p := pcs.Pchannels[0]; p.Name != "dml_0" || p.OwnerState != "UP" {
		t.Fatalf("after a heartbeat %s owner state %q, want UP", p.Name, p.OwnerState)
	}
}
