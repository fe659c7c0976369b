package cluster_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/testutil"
)

// floodRaftTimeouts are raft timeouts for the flood tests and others that
// an election would void. The defaults (docs/operations.md#raft-timeouts)
// keep a leader at moderate load; a flood of
// thousands of calls on a small shared one (2 cores, load above 20) delays
// heartbeats past them, leaders step down and forwarded calls answer
// "no leader is known". That is scheduling noise, not what these tests
// measure (the caps and the queue), so they give raft room.
var floodRaftTimeouts = []string{"--heartbeat-timeout", "2s", "--election-timeout", "2s", "--leader-lease-timeout", "2s"}

// TestProposalFloodPastQueueLeavesMemberServing: a leader whose proposal
// queue is capped at 1 (--max-pending-proposals) gets 4,000 concurrent
// writes, a quarter of them forwarded by the followers. Past the cap it
// answers ResourceExhausted at once with a retry hint (through forwarding
// too), never anything else; the refusals are exported as
// coordd_limit_refused_total{limit="pending_proposals"}; and afterwards
// every member still serves writes and reads.
func TestProposalFloodPastQueueLeavesMemberServing(t *testing.T) {
	const flood, conns = 4000, 40
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: append([]string{"--max-pending-proposals", "1"}, floodRaftTimeouts...)})
	c := dialAll(t, l)
	li := leaderIndex(t, l, c, -1)
	leader := l.Members()[li]

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcs, err := coordpb.NewChannelsClient(c.conns[li]).ListPChannels(ctx, &coordpb.ListPChannelsRequest{})
	if err != nil || len(pcs.Pchannels) == 0 {
		t.Fatalf("list pchannels: %v %v", pcs, err)
	}
	// Followers forward only once the leader's addresses are in their
	// directory: wait until a write through each member commits.
	for i, conn := range c.conns {
		testutil.Eventually(t, "a write through member "+strconv.Itoa(i), func() bool {
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			defer acancel()
			_, err := coordpb.NewAllocatorClient(conn).AllocID(actx, &coordpb.AllocIDRequest{Count: 1})
			if err != nil && status.Code(err) != codes.Unavailable {
				t.Fatalf("AllocID through member %d before the flood: %v", i, err)
			}
			return err == nil
		})
	}
	// Adding a PChannel that exists is a committed no-op: one proposal.
	req := &coordpb.AddPChannelsRequest{Names: []string{pcs.Pchannels[0].Name}}

	var ok, exhausted, hinted, other atomic.Int64
	var lastOther atomic.Value
	var wg sync.WaitGroup
	startGun := make(chan struct{})
	for i := 0; i < conns; i++ {
		m := l.Members()[li]
		if i%4 == 3 { // a quarter through a follower, which forwards
			m = l.Members()[(li+1+i%2)%3]
		}
		conn, err := grpc.NewClient(m.GRPCAddr, dialOptions(l)...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cl := coordpb.NewChannelsClient(conn)
		for j := 0; j < flood/conns; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-startGun
				var trailer metadata.MD
				_, err := cl.AddPChannels(ctx, req, grpc.Trailer(&trailer))
				switch {
				case err == nil:
					ok.Add(1)
				case status.Code(err) == codes.ResourceExhausted:
					exhausted.Add(1)
					if v := trailer.Get(grpcserver.MDRetryAfter); len(v) == 1 {
						if ms, perr := strconv.Atoi(v[0]); perr == nil && ms > 0 {
							hinted.Add(1)
						}
					}
				default:
					other.Add(1)
					lastOther.Store(err.Error())
				}
			}()
		}
	}
	termOf := func() uint64 {
		st, err := coordpb.NewClusterClient(c.conns[li]).Status(ctx, &coordpb.StatusRequest{})
		if err != nil {
			t.Fatalf("status of the leader: %v", err)
		}
		return st.Term
	}
	termBefore := termOf()
	start := time.Now()
	close(startGun)
	wg.Wait()
	t.Logf("flood of %d writes in %v: %d committed, %d ResourceExhausted (%d with a retry hint), %d other",
		flood, time.Since(start), ok.Load(), exhausted.Load(), hinted.Load(), other.Load())
	// An election during the flood (a CPU-starved machine misses
	// heartbeats) legitimately fails writes with Unavailable; without one,
	// every refusal must be ResourceExhausted.
	if termAfter := termOf(); other.Load() != 0 && termAfter != termBefore {
		t.Logf("the term moved from %d to %d during the flood: %d writes failed with %v", termBefore, termAfter, other.Load(), lastOther.Load())
	} else if other.Load() != 0 {
		t.Fatalf("%d writes failed otherwise than ResourceExhausted (last: %v)", other.Load(), lastOther.Load())
	}
	if exhausted.Load() == 0 || ok.Load() == 0 {
		t.Fatalf("%d committed, %d refused; want both past a queue of 1", ok.Load(), exhausted.Load())
	}
	if hinted.Load() != exhausted.Load() {
		t.Fatalf("%d of %d refusals carried %s", hinted.Load(), exhausted.Load(), grpcserver.MDRetryAfter)
	}
	if got := metricValue(t, l, leader.HTTPAddr, `coordd_limit_refused_total{limit="pending_proposals"}`); got < float64(exhausted.Load()) {
		t.Errorf("leader counted %.0f refusals, the clients saw %d", got, exhausted.Load())
	}
	if got := metricValue(t, l, leader.HTTPAddr, `coordd_limit_max{limit="pending_proposals"}`); got != 1 {
		t.Errorf("coordd_limit_max{limit=\"pending_proposals\"} = %v, want 1", got)
	}

	// Every member still serves: a write through each commits, and each
	// answers a linearizable read.
	for i, conn := range c.conns {
		for {
			_, err := coordpb.NewAllocatorClient(conn).AllocID(ctx, &coordpb.AllocIDRequest{Count: 1})
			if err == nil {
				break
			}
			if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
				t.Fatalf("AllocID through member %d after the flood: %v", i, err)
			}
			time.Sleep(100 * time.Millisecond) // an election after the flood
		}
		if _, err := coordpb.NewChannelsClient(conn).ListPChannels(ctx, &coordpb.ListPChannelsRequest{}); err != nil {
			t.Fatalf("linearizable read on member %d after the flood: %v", i, err)
		}
	}
}
