package main

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
)

func TestParseClients(t *testing.T) {
	got, err := parseClients("1, 16,64")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 16 || got[2] != 64 {
		t.Fatalf("parseClients = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "1,,2", "2000"} {
		if _, err := parseClients(bad); err == nil {
			t.Errorf("parseClients(%q) accepted", bad)
		}
	}
}

func TestNextPositionGrowsAndRunsAhead(t *testing.T) {
	prev := nextPosition()
	for range 10000 {
		p := nextPosition()
		if p <= prev {
			t.Fatalf("position %d after %d", p, prev)
		}
		prev = p
	}
	if now := uint64(time.Now().UnixMilli()) << 18; prev < now {
		t.Fatalf("position %d is behind the wall clock %d", prev, now)
	}
}

// Every VChannel belongs to exactly one client, whatever the client count.
func TestMinePartitionsTheVChannels(t *testing.T) {
	d := &dataSet{}
	for i := range dataVChannels {
		d.vchs = append(d.vchs, dataVch{segment: int64(i)})
	}
	for _, clients := range []int{1, 16, 64, 999} {
		seen := map[int64]int{}
		for c := range clients {
			for _, v := range d.mine(c, clients) {
				seen[v.segment]++
			}
		}
		if len(seen) != dataVChannels {
			t.Fatalf("%d clients cover %d of %d vchannels", clients, len(seen), dataVChannels)
		}
		for s, n := range seen {
			if n != 1 {
				t.Fatalf("%d clients: vchannel %d taken %d times", clients, s, n)
			}
		}
	}
}

func TestFsyncRateIsBounded(t *testing.T) {
	dir := t.TempDir()
	r, err := fsyncRate(dir, 20, 5*time.Second)
	if err != nil || r <= 0 {
		t.Fatalf("fsyncRate = %v, %v", r, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the probe left %d files", len(left))
	}
	if _, err := fsyncRate("/nonexistent-dir", 1, time.Second); err == nil {
		t.Fatal("a missing directory was accepted")
	}
}

func TestRunCellCountsErrorsAndStopsAtMaxOps(t *testing.T) {
	calls := 0
	st := runCell(1, 5*time.Second, time.Second, 10, func(int) clientOp {
		return func(_ context.Context, i int) error {
			calls++
			if i%2 == 1 {
				return errors.New("odd")
			}
			return nil
		}
	}, nil)
	// warm-up pass and measured pass, 10 calls each
	if calls != 20 || st.Ops+st.Errors != 10 || st.Errors != 5 || st.FirstErr == nil {
		t.Fatalf("calls %d, stats %+v", calls, st)
	}
}

func TestPortsFreeRefusesATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := portsFree([]int{port}); err == nil {
		t.Fatal("a listening port was reported free")
	}
	l.Close()
	if err := portsFree([]int{port}); err != nil {
		t.Fatalf("a closed port: %v", err)
	}
	if got := launcherPorts(100, 1, 1); len(got) != 5 || got[0] != 100 || got[3] != 300 {
		t.Fatalf("launcherPorts = %v", got)
	}
}

// A VChannel's owner follows the last owners read; without one, set-up's.
func TestCurrentOwner(t *testing.T) {
	d := &dataSet{}
	v := dataVch{name: "p1_1v0", pchannel: "p1", node: 1, term: 2}
	if got := d.current(v); got.node != 1 || got.term != 2 {
		t.Fatalf("before any refresh: %+v", got)
	}
	d.owners.Store(&map[string]owner{"p1": {node: 3, term: 5}})
	if got := d.current(v); got.node != 3 || got.term != 5 || got.name != v.name {
		t.Fatalf("after a refresh: %+v", got)
	}
	d.refused(nil, nil) // no error: nothing to do (and no call on the nil conn)
	d.refused(nil, errors.New("deadline exceeded"))
}

// w6 is in the -compare table with its set-up, teardown and one variant.
func TestW6IsWired(t *testing.T) {
	def, ok := workloads()["w6"]
	if !ok || def.setup == nil || def.teardown == nil || len(def.variants) != 1 || def.variants[0].newOp == nil {
		t.Fatalf("w6 = %+v, %v", def, ok)
	}
	if def.callTimeout < 10*time.Second {
		t.Fatalf("w6 call timeout %v", def.callTimeout)
	}
}

func churnView(nodes []uint64, chans map[string]uint64) *client.AssignmentView {
	v := &client.AssignmentView{Nodes: map[uint64]*coordpb.StreamingNode{}, Channels: map[string]*coordpb.ChannelAssignment{}}
	for _, n := range nodes {
		v.Nodes[n] = &coordpb.StreamingNode{Id: n, State: "UP"}
	}
	for name, n := range chans {
		v.Channels[name] = &coordpb.ChannelAssignment{Pchannel: name, NodeId: n, State: "ASSIGNED"}
	}
	return v
}

func TestChurnConditions(t *testing.T) {
	// a join: visible and holding a channel, or not due one
	if joinedIn(churnView([]uint64{1, 2}, map[string]uint64{"a": 1, "b": 1}), 3) {
		t.Fatal("a node not in the view counted as joined")
	}
	if joinedIn(churnView([]uint64{1, 2, 3}, map[string]uint64{"a": 1, "b": 1, "c": 2}), 3) {
		t.Fatal("node 3 joined with nothing while node 1 holds two")
	}
	if !joinedIn(churnView([]uint64{1, 2, 3}, map[string]uint64{"a": 1, "b": 3, "c": 2}), 3) {
		t.Fatal("node 3 holding a channel is not joined")
	}
	if !joinedIn(churnView([]uint64{1, 2, 3}, map[string]uint64{"a": 1, "c": 2}), 3) {
		t.Fatal("node 3 is due nothing (every node holds one)")
	}
	// a leave: gone, named by no channel, its channels owned by live nodes
	if leftIn(churnView([]uint64{1, 2, 3}, map[string]uint64{"a": 1, "b": 2}), 3, nil) {
		t.Fatal("a live node counted as left")
	}
	if leftIn(churnView([]uint64{1, 2}, map[string]uint64{"a": 1, "b": 3}), 3, []string{"b"}) {
		t.Fatal("a channel still on the node that left")
	}
	v := churnView([]uint64{1, 2}, map[string]uint64{"a": 1, "b": 2})
	v.Channels["b"].State = "ASSIGNING"
	if leftIn(v, 3, []string{"b"}) {
		t.Fatal("a moved channel not yet ASSIGNED counted as settled")
	}
	if !leftIn(churnView([]uint64{1, 2}, map[string]uint64{"a": 1, "b": 2}), 3, []string{"b"}) {
		t.Fatal("a settled leave not recognised")
	}
}
