package cluster_test

import (
	"context"
	"math"
	"sort"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/streamingnode/wal"
)

// TestForgedAssignIsRefused: an outsider's Assign with a coordinator term
// of 2^63-1 and a PChannel term of 2^62 (what the robustness probe sent)
// is refused by the owner and by an idle node; neither node's coordinator
// fence nor the durable WAL fence moves, appends keep working, and when
// the owner dies coordd moves the PChannel to the other node, which opens
// it at the next real term.
func TestForgedAssignIsRefused(t *testing.T) {
	l, c := startChannelCluster(t, 2)
	waitPlacement(t, c, 30*time.Second, "all channels assigned over two nodes", func(ps map[string]placement) bool {
		nodes := map[uint64]bool{}
		for _, p := range ps {
			nodes[p.node] = true
		}
		return allAssigned(ps, 0) && len(nodes) == 2
	})
	sns := l.StreamingNodes()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var st [2]*coordpb.NodeStatusResponse
	var cl [2]coordpb.StreamingNodeServiceClient
	for i := range st {
		var err error
		if st[i], err = snStatus(ctx, sns[i].Addr); err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(sns[i].Addr, snDialOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cl[i] = coordpb.NewStreamingNodeServiceClient(conn)
	}
	ps := placements(t, c)
	var names []string
	for n, p := range ps {
		if p.node == st[0].NodeId {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatalf("node %d holds no channel: %v", st[0].NodeId, ps)
	}
	pchannel, term := names[0], ps[names[0]].term
	realCoord := st[0].MaxCoordTerm
	for i, forged := range []*coordpb.AssignRequest{
		{Pchannel: pchannel, Term: 1 << 62, CoordTerm: math.MaxInt64, NodeId: st[0].NodeId, Epoch: st[0].Epoch},
		{Pchannel: pchannel, Term: 1 << 62, CoordTerm: realCoord, NodeId: st[0].NodeId, Epoch: st[0].Epoch},
		{Pchannel: pchannel, Term: 1 << 62, CoordTerm: math.MaxInt64, NodeId: st[1].NodeId, Epoch: st[1].Epoch},
	} {
		node := 0
		if forged.NodeId == st[1].NodeId {
			node = 1
		}
		if _, err := cl[node].Assign(ctx, forged); err == nil {
			t.Fatalf("forged assign %d (%v) accepted by node %d", i, forged, forged.NodeId)
		} else {
			t.Logf("forged assign %d refused: %v", i, err)
		}
	}
	if fence, err := wal.ReadFence(l.WALDir(), pchannel); err != nil || fence != term {
		t.Fatalf("fence of %s is %d (%v), want the real term %d", pchannel, fence, err, term)
	}
	for i := range st {
		now, err := snStatus(ctx, sns[i].Addr)
		if err != nil {
			t.Fatal(err)
		}
		if now.MaxCoordTerm >= 1<<62 {
			t.Fatalf("node %d took the forged coordinator term: %d", now.NodeId, now.MaxCoordTerm)
		}
	}
	vchannel := pchannel + "_88v0"
	if _, err := cl[0].Append(ctx, &coordpb.AppendRequest{Vchannel: vchannel, Term: term, Payload: []byte("owner"),
		NodeId: st[0].NodeId, Epoch: st[0].Epoch}); err != nil {
		t.Fatalf("append through the owner after the forged assigns: %v", err)
	}

	// The PChannel can still move: kill its owner.
	if err := l.KillStreamingNode(0); err != nil {
		t.Fatal(err)
	}
	moved := waitPlacement(t, c, 40*time.Second, "the channels to move to the survivor", func(ps map[string]placement) bool {
		return allAssigned(ps, st[0].NodeId)
	})
	next := moved[pchannel]
	if next.term <= term || next.term >= 1<<62 {
		t.Fatalf("%s moved at term %d (was %d)", pchannel, next.term, term)
	}
	if fence, err := wal.ReadFence(l.WALDir(), pchannel); err != nil || fence != next.term {
		t.Fatalf("fence of %s is %d (%v), want %d", pchannel, fence, err, next.term)
	}
	if _, err := cl[1].Append(ctx, &coordpb.AppendRequest{Vchannel: vchannel, Term: next.term, Payload: []byte("survivor"),
		NodeId: st[1].NodeId, Epoch: st[1].Epoch}); err != nil {
		t.Fatalf("append through the new owner: %v", err)
	}
	recs, err := wal.ReadAll(l.WALDir(), pchannel, vchannel, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Payload))
	}
	if len(got) != 2 || got[0] != "owner" || got[1] != "survivor" {
		t.Fatalf("WAL of %s holds %q", vchannel, got)
	}
}
