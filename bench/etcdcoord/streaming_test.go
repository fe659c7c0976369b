package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/balancer/policy"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startTestEtcd runs a one-member etcd on loopback (the binary built by
// bench/etcd/build.sh; the test is skipped without it).
func startTestEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	bin := os.Getenv("COORDD_BENCH_ETCD")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache", "coordd-bench", "bin", "etcd")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no etcd binary at %s (bash bench/etcd/build.sh)", bin)
	}
	cp, pp := freePort(t), freePort(t)
	caddr, paddr := fmt.Sprintf("http://127.0.0.1:%d", cp), fmt.Sprintf("http://127.0.0.1:%d", pp)
	cmd := exec.Command(bin, "--name", "t", "--data-dir", t.TempDir(), "--listen-client-urls", caddr, "--advertise-client-urls", caddr,
		"--listen-peer-urls", paddr, "--initial-advertise-peer-urls", paddr, "--initial-cluster", "t="+paddr, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{caddr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "x")
		cancel()
		if err == nil {
			return cli
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd not up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fakeNode answers Assign and Remove at once and counts Assigns.
type fakeNode struct {
	coordpb.UnimplementedStreamingNodeServiceServer
	assigns atomic.Int64
}

func (f *fakeNode) Assign(context.Context, *coordpb.AssignRequest) (*coordpb.AssignResponse, error) {
	f.assigns.Add(1)
	return &coordpb.AssignResponse{}, nil
}

func (f *fakeNode) Remove(context.Context, *coordpb.RemoveRequest) (*coordpb.RemoveResponse, error) {
	return &coordpb.RemoveResponse{}, nil
}

func serve(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

func pchannelRecords(t *testing.T, cli *clientv3.Client) map[string]*coordpb.PChannel {
	t.Helper()
	resp, err := cli.Get(context.Background(), pchannelPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*coordpb.PChannel{}
	for _, kv := range resp.Kvs {
		p := &coordpb.PChannel{}
		if err := proto.Unmarshal(kv.Value, p); err != nil {
			t.Fatal(err)
		}
		out[p.Name] = p
	}
	return out
}

// waitView reads the assignment stream until ok holds for an update.
func waitView(t *testing.T, stream grpc.ServerStreamingClient[coordpb.AssignmentUpdate], ok func(*coordpb.AssignmentUpdate) bool) *coordpb.AssignmentUpdate {
	t.Helper()
	for {
		u, err := stream.Recv()
		if err != nil {
			t.Fatalf("assignment stream: %v", err)
		}
		if !u.Full {
			t.Fatal("the peer sent a delta")
		}
		if ok(u) {
			return u
		}
	}
}

func allOn(u *coordpb.AssignmentUpdate, node uint64) bool {
	for _, c := range u.Channels {
		if c.State != "ASSIGNED" || c.NodeId != node {
			return false
		}
	}
	return len(u.Channels) > 0
}

// A join is persisted in etcd with a new term and streamed to watchers; a
// transaction of a stale coordinator session or on a stale PChannel
// revision changes nothing; a leave moves the channels to the survivor.
func TestStreamingJoinLeave(t *testing.T) {
	cli := startTestEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := newStore(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := newCatalog(kv, nil, nil, 4)
	if err != nil {
		t.Fatal(err)
	}
	pc := policy.DefaultConfig()
	pc.MinRebalanceInterval = 0
	pol, err := policy.New("", pc)
	if err != nil {
		t.Fatal(err)
	}
	asg, err := newAssigner(ctx, kv, cat, pol)
	if err != nil {
		t.Fatal(err)
	}
	defer asg.conns.close()
	if err := watchSessions(ctx, cli, asg); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go asg.run(stop)
	reg := newRegistry(kv, asg)
	addr := serve(t, func(s *grpc.Server) { coordpb.RegisterChannelsServer(s, &channelServer{cat: cat, asg: asg}) })
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := coordpb.NewChannelsClient(conn).WatchAssignments(ctx, &coordpb.WatchAssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first := waitView(t, stream, func(*coordpb.AssignmentUpdate) bool { return true })

	nodeA, nodeB := &fakeNode{}, &fakeNode{}
	addrA := serve(t, func(s *grpc.Server) { coordpb.RegisterStreamingNodeServiceServer(s, nodeA) })
	addrB := serve(t, func(s *grpc.Server) { coordpb.RegisterStreamingNodeServiceServer(s, nodeB) })
	ra, err := reg.RegisterStreamingNode(ctx, &coordpb.RegisterStreamingNodeRequest{Address: addrA, Incarnation: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if ra.NodeId < 2 {
		t.Fatalf("node id %d collides with the data path's node 1", ra.NodeId)
	}
	u := waitView(t, stream, func(u *coordpb.AssignmentUpdate) bool { return allOn(u, ra.NodeId) })
	if u.Version.Local <= first.Version.Local || len(u.Nodes) != 1 || u.Nodes[0].Epoch != ra.Epoch {
		t.Fatalf("view after the join: %v (first %v)", u, first.Version)
	}
	for name, p := range pchannelRecords(t, cli) {
		if p.State != "ASSIGNED" || p.NodeId != ra.NodeId || p.Term != 2 || p.NodeAddress != addrA {
			t.Fatalf("%s persisted as %v, want ASSIGNED to %d at term 2", name, p, ra.NodeId)
		}
	}
	if n := nodeA.assigns.Load(); n != 4 {
		t.Fatalf("node A got %d Assign calls, want 4", n)
	}
	if _, err := reg.Heartbeat(ctx, &coordpb.HeartbeatRequest{NodeId: ra.NodeId, Epoch: ra.Epoch}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if _, err := reg.Heartbeat(ctx, &coordpb.HeartbeatRequest{NodeId: ra.NodeId, Epoch: ra.Epoch + 1}); err == nil {
		t.Fatal("a heartbeat of another epoch was accepted")
	}

	// A coordinator whose session revision is not the current one (it was
	// replaced) is fenced, and a stale key revision is a conflict; neither
	// changes a record.
	before := pchannelRecords(t, cli)
	asg.mu.Lock()
	name := asg.names[0]
	cur := *asg.chans[name]
	asg.mu.Unlock()
	to := &coordpb.StreamingNode{Id: 99, Address: "127.0.0.1:1"}
	stale := &store{cli: cli, sessionRev: kv.sessionRev - 1}
	bad := &assigner{kv: stale, chans: map[string]*pchState{name: {}}, changed: make(chan struct{}), names: []string{name}}
	if err := bad.persist(ctx, []*move{{name: name, to: to, term: cur.term + 1, rev: cur.rev}}, "ASSIGNING"); !errors.Is(err, errFenced) {
		t.Fatalf("stale session: %v", err)
	}
	bad.kv = kv
	if err := bad.persist(ctx, []*move{{name: name, to: to, term: cur.term + 1, rev: cur.rev - 1}}, "ASSIGNING"); !errors.Is(err, errConflict) {
		t.Fatalf("stale pchannel revision: %v", err)
	}
	for n, p := range pchannelRecords(t, cli) {
		if !proto.Equal(p, before[n]) {
			t.Fatalf("%s changed by a refused txn: %v -> %v", n, before[n], p)
		}
	}

	// B joins (the balancer evens the counts), then A leaves: everything
	// ends on B, each moved channel at a higher term.
	rb, err := reg.RegisterStreamingNode(ctx, &coordpb.RegisterStreamingNodeRequest{Address: addrB, Incarnation: "b"})
	if err != nil {
		t.Fatal(err)
	}
	waitView(t, stream, func(u *coordpb.AssignmentUpdate) bool {
		n := 0
		for _, c := range u.Channels {
			if c.State == "ASSIGNED" && c.NodeId == rb.NodeId {
				n++
			}
		}
		return n == 2
	})
	if _, err := reg.Deregister(ctx, &coordpb.NodeSessionRequest{NodeId: ra.NodeId, Epoch: ra.Epoch}); err != nil {
		t.Fatal(err)
	}
	u = waitView(t, stream, func(u *coordpb.AssignmentUpdate) bool { return allOn(u, rb.NodeId) })
	if len(u.Nodes) != 1 || u.Nodes[0].Id != rb.NodeId {
		t.Fatalf("nodes after A left: %v", u.Nodes)
	}
	if g, err := cli.Get(ctx, snSessionKey(ra.NodeId)); err != nil || len(g.Kvs) != 0 {
		t.Fatalf("A's session key after Deregister: %v %v", g, err)
	}
	for name, p := range pchannelRecords(t, cli) {
		if p.NodeId != rb.NodeId || p.Term < 3 {
			t.Fatalf("%s after the leave: %v", name, p)
		}
	}
}
