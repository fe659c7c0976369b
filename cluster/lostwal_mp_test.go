package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/testutil"
)

// TestLostWALIsReassigned: a streaming node loses the WAL of a channel
// coordd has ASSIGNED to it, behind coordd's back (the node runs with
// --test-only-unsafe-accept-any-remove and the test sends it the Remove a
// forger would: every value comes from ListPChannels and the node's
// Status). The node stays UP and heartbeating, so only lost-WAL detection
// can notice: within one heartbeat timeout (--node-ttl) plus a balance
// round the channel is ASSIGNED again at a higher term, held by a node,
// the leader counts it in coordd_pchannel_lost_wal_total{reason="missing"},
// and the node's session (epoch) never ended. On a coordd without the
// detection the channel stays ASSIGNED at its old term, unheld.
func TestLostWALIsReassigned(t *testing.T) {
	const ttl = 10 * time.Second
	l := startClusterWith(t, cluster.LauncherConfig{
		ExtraArgs:          []string{"--pchannels", "4", "--node-ttl", ttl.String(), "--balance-interval", "1s", "--min-rebalance-interval", "0s"},
		StreamingNodes:     1,
		StreamingExtraArgs: []string{"--heartbeat-interval", "500ms", "--test-only-unsafe-accept-any-remove"},
	})
	c, err := client.New(context.Background(), secured(l, client.Config{Endpoints: strings.Split(l.Endpoints(), ","), RequestTimeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	before := waitPlacement(t, c, 30*time.Second, "every channel ASSIGNED", func(ps map[string]placement) bool { return allAssigned(ps, 0) })

	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(90*time.Second))
	defer cancel()
	addr := l.StreamingNodes()[0].Addr
	st, err := snStatus(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	const victim = "by-dev-rootcoord-dml_0"
	old := before[victim]
	conn, err := grpc.NewClient(addr, snDialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := coordpb.NewStreamingNodeServiceClient(conn).Remove(ctx, &coordpb.RemoveRequest{Pchannel: victim, Term: old.term,
		CoordTerm: st.MaxCoordTerm, NodeId: st.NodeId, Epoch: st.Epoch}); err != nil {
		t.Fatalf("the test-only Remove behind coordd's back: %v", err)
	}
	removedAt := time.Now()
	if now, err := snStatus(ctx, addr); err != nil {
		t.Fatal(err)
	} else {
		for _, w := range now.Wals {
			if w.Pchannel == victim {
				t.Fatalf("the node still holds %s after the Remove: %v", victim, w)
			}
		}
	}

	var moved placement
	testutil.EventuallyEvery(t, ttl+20*time.Second, 100*time.Millisecond, victim+" ASSIGNED again at a higher term", func() bool {
		moved = placements(t, c)[victim]
		return moved.state == "ASSIGNED" && moved.term > old.term
	})
	took := time.Since(removedAt)
	t.Logf("%s: term %d -> %d, ASSIGNED again %v after the WAL was lost", victim, old.term, moved.term, took.Round(time.Millisecond))
	if bound := testutil.Timeout(ttl + 5*time.Second); took > bound {
		t.Fatalf("reassigned after %v, want within the heartbeat timeout plus a balance round (%v)", took, bound)
	}
	testutil.Eventually(t, "the node to hold "+victim+" at the new term", func() bool {
		now, err := snStatus(ctx, addr)
		if err != nil {
			return false
		}
		for _, w := range now.Wals {
			if w.Pchannel == victim && w.Term == moved.term {
				return true
			}
		}
		return false
	})
	if now, err := snStatus(ctx, addr); err != nil || now.NodeId != st.NodeId || now.Epoch != st.Epoch {
		t.Fatalf("the node's session changed (node %d epoch %d -> %v): the reassignment came from node-down, not lost-WAL detection (%v)",
			st.NodeId, st.Epoch, now, err)
	}
	members := l.Members()
	leader := leaderIndex(t, l, dialAll(t, l), -1)
	if v := metricValue(t, l, members[leader].HTTPAddr, `coordd_pchannel_lost_wal_total{reason="missing"}`); v != 1 {
		t.Fatalf(`coordd_pchannel_lost_wal_total{reason="missing"} = %v on the leader, want 1`, v)
	}
}
