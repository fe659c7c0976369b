package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/client/clienttest"
)

// A simulated node registers at its address with a new incarnation per
// join, heartbeats while joined, and deregisters on leave.
func TestSimNodeJoinLeave(t *testing.T) {
	fake := clienttest.Start(t, 1)
	c, err := client.New(context.Background(), client.Config{Endpoints: fake.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	self := c.NewWatcher()
	go func() { _ = self.Run(ctx) }()
	conn, err := dial(fake.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	srv := newSimServer()
	defer srv.srv.Stop()
	addr, err := srv.listen()
	if err != nil {
		t.Fatal(err)
	}
	n := &simNode{addr: addr, reg: coordpb.NewStreamingNodeRegistryClient(conn), self: self}
	if _, _, err := n.leave(ctx); err == nil {
		t.Fatal("a node that never joined left")
	}
	id, err := n.join(ctx)
	if err != nil || !n.joined() {
		t.Fatalf("join: %d %v", id, err)
	}
	if _, err := n.join(ctx); err == nil {
		t.Fatal("a joined node joined again")
	}
	node := fake.Nodes[0]
	for node.Calls("Heartbeat") == 0 {
		if ctx.Err() != nil {
			t.Fatal("no heartbeat after the join")
		}
		time.Sleep(20 * time.Millisecond)
	}
	left, _, err := n.leave(ctx)
	if err != nil || left != id || n.joined() {
		t.Fatalf("leave: %d %v (joined %v)", left, err, n.joined())
	}
	beats := node.Calls("Heartbeat")
	time.Sleep(1200 * time.Millisecond)
	if got := node.Calls("Heartbeat"); got != beats {
		t.Fatalf("%d heartbeats after the leave", got-beats)
	}
	var down bool
	for _, sn := range fake.ChannelState().Nodes {
		if sn.Id == id {
			down = sn.State == "DOWN"
		}
	}
	if !down || node.Calls("Deregister") != 1 {
		t.Fatalf("node %d not deregistered (%d calls)", id, node.Calls("Deregister"))
	}
	again, err := n.join(ctx)
	if err != nil || again == id {
		t.Fatalf("rejoin: %d %v (first %d)", again, err, id)
	}
	// the simulated service answers Assign and Remove at once
	sc := coordpb.NewStreamingNodeServiceClient(mustDial(t, addr))
	if _, err := sc.Assign(ctx, &coordpb.AssignRequest{Pchannel: "p", Term: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Remove(ctx, &coordpb.RemoveRequest{Pchannel: "p", Term: 2}); err != nil {
		t.Fatal(err)
	}
	if srv.ans.assigns.Load() != 1 || srv.ans.removes.Load() != 1 {
		t.Fatalf("assigns %d removes %d", srv.ans.assigns.Load(), srv.ans.removes.Load())
	}
}

func mustDial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	c, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
