package grpcserver

import (
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/raftnode"
)

// TestStatusFollowsChanges: Status caches its member list, and a change
// of what it is built from shows in the next answer: a directory record
// (re-registered addresses), the newest snapshot, and raft's
// configuration.
func TestStatusFollowsChanges(t *testing.T) {
	tn := startTestNode(t)
	status := func() *coordpb.StatusResponse {
		t.Helper()
		resp, err := tn.cluster.Status(callCtx(t), &coordpb.StatusRequest{})
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		return resp
	}
	first := status()
	checkMembers(t, "Status", first.Members, tn.self)
	if again := status(); again.Members[0].HttpAddr != tn.self.HTTPAddr {
		t.Fatalf("second Status: http addr %q; want %q", again.Members[0].HttpAddr, tn.self.HTTPAddr)
	}

	moved := tn.self
	moved.HTTPAddr = "127.0.0.1:3"
	if _, err := tn.cluster.RegisterMember(callCtx(t), &coordpb.RegisterMemberRequest{
		Id: moved.ID, RaftAddr: moved.RaftAddr, GrpcAddr: moved.GRPCAddr, HttpAddr: moved.HTTPAddr,
	}); err != nil {
		t.Fatalf("RegisterMember: %v", err)
	}
	checkMembers(t, "Status after RegisterMember", status().Members, moved)

	if err := tn.node.Snapshot(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if got, want := status().LastSnapshotIndex, tn.node.LastSnapshotIndex(); got == 0 || got != want {
		t.Errorf("last snapshot index after a snapshot = %d; want %d (> 0)", got, want)
	}

	// A configuration change (a single-member cluster cannot make one
	// without losing its quorum): the cache answers for the new one.
	var c statusMembers
	st := tn.node.State()
	one := []raftnode.Server{{ID: moved.ID, RaftAddr: moved.RaftAddr, Voter: true}}
	checkMembers(t, "one member", c.get(one, moved.ID, st), moved)
	two := append([]raftnode.Server{}, one[0], raftnode.Server{ID: "n2", RaftAddr: "127.0.0.1:9"})
	if got := c.get(two, moved.ID, st); len(got) != 2 || got[1].Id != "n2" || got[1].Suffrage != "nonvoter" {
		t.Errorf("two members = %v; want %s and the non-voter n2", got, moved.ID)
	}
	if got := c.get(two, "n2", st); got[0].Leader || !got[1].Leader {
		t.Errorf("after a leader change = %v; want n2 the leader", got)
	}
}
