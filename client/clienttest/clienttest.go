// Package clienttest is an in-process fake of a coordd cluster for tests of
// the client package and of tools built on it (cmd/coordctl). Each fake node
// is a real gRPC server on 127.0.0.1:0 serving the Cluster, Allocator,
// Channels, StreamingNodeRegistry and Broadcaster services over state shared
// by all nodes; WatchAssignments plays per-node scripts (see ScriptWatch) and
// Broadcast plays cluster-wide ones (see ScriptBroadcast). Tests inject
// failures with per-node hooks and read per-node call counts.
package clienttest

import (
	"context"
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// Response metadata keys; they mirror the client package's MD* constants
// (this package cannot import client without an import cycle in its tests).
const (
	mdLeaderID   = "coordd-leader-id"
	mdLeaderGRPC = "coordd-leader-grpc"
	mdOutcome    = "coordd-outcome"
	mdRetryAfter = "coordd-retry-after-ms"
)

// Fixed values the fake reports, for assertions.
const (
	CommitIndex     = 120
	AppliedIndex    = 119
	LastLogIndex    = 121
	SnapshotIndex   = 100
	FirstTimestamp  = uint64(1_700_000_000_000) << 18
	FirstID         = uint64(1)
	snapshotChunkSz = 4
)

// Hook runs before each RPC a node receives; call counts from 1 per method.
// A non-nil error is returned to the client instead of the normal answer.
type Hook func(ctx context.Context, method string, call int) error

// Cluster is a fake coordd cluster.
type Cluster struct {
	Nodes []*Node

	mu       sync.Mutex
	leader   int // index into Nodes; -1 means no leader
	term     uint64
	members  []*coordpb.Member
	nextTS   uint64
	nextID   uint64
	snapshot []byte
	forward  bool
	// backupLie: SaveSnapshot sends a wrong checksum.
	backupLie bool
	ch        channels
	bc        broadcasts
}

// Node is one fake coordd node.
type Node struct {
	coordpb.UnimplementedClusterServer
	coordpb.UnimplementedAllocatorServer
	coordpb.UnimplementedChannelsServer
	coordpb.UnimplementedStreamingNodeRegistryServer
	coordpb.UnimplementedBroadcasterServer
	coordpb.UnimplementedBackupServer

	ID   string
	Addr string // gRPC address

	c     *Cluster
	srv   *grpc.Server
	mu    sync.Mutex
	hook  Hook
	hits  map[string]int
	watch watchState
}

// Start starts an n-node fake cluster whose first node leads. Followers
// forward leader-only calls (as real nodes do) until SetForwarding(false).
// The servers stop when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{term: 2, nextTS: FirstTimestamp, nextID: FirstID, forward: true,
		snapshot: []byte("fake snapshot: 0123456789"), ch: newChannels(), bc: newBroadcasts()}
	for i := 0; i < n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nd := &Node{ID: fmt.Sprintf("n%d", i+1), Addr: lis.Addr().String(), c: c, hits: map[string]int{}}
		nd.srv = grpc.NewServer(grpc.UnaryInterceptor(nd.unary), grpc.StreamInterceptor(nd.stream))
		coordpb.RegisterClusterServer(nd.srv, nd)
		coordpb.RegisterAllocatorServer(nd.srv, nd)
		coordpb.RegisterChannelsServer(nd.srv, nd)
		coordpb.RegisterStreamingNodeRegistryServer(nd.srv, nd)
		coordpb.RegisterBroadcasterServer(nd.srv, nd)
		coordpb.RegisterBackupServer(nd.srv, nd)
		go nd.srv.Serve(lis)
		t.Cleanup(nd.srv.Stop)
		c.Nodes = append(c.Nodes, nd)
		c.members = append(c.members, &coordpb.Member{
			Id: nd.ID, RaftAddr: fmt.Sprintf("127.0.0.1:%d", 8001+i), GrpcAddr: nd.Addr,
			HttpAddr: fmt.Sprintf("127.0.0.1:%d", 9001+i), Suffrage: "voter",
		})
	}
	return c
}

// Endpoints returns every node's gRPC address.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr)
	}
	return out
}

// SetLeader makes Nodes[i] the leader (i < 0: no leader) in a new term.
func (c *Cluster) SetLeader(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = i
	c.term++
}

// SetForwarding chooses whether followers serve leader-only calls (true)
// or answer Unavailable with a leader hint in the trailer (false).
func (c *Cluster) SetForwarding(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forward = on
}

// SetSnapshot sets the bytes Snapshot streams.
func (c *Cluster) SetSnapshot(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snapshot = slices.Clone(b)
}

// Stop stops the node's server; its address refuses connections.
func (n *Node) Stop() { n.srv.Stop() }

// SetHook installs h (nil removes it).
func (n *Node) SetHook(h Hook) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hook = h
}

// Calls returns how many times method ("Status", "AllocID", ...) reached
// this node.
func (n *Node) Calls(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hits[method]
}

// NotLeader sets leader-hint metadata and "coordd-outcome: none" (in the
// trailer, or the header when inHeader) and returns the Unavailable error
// a follower that cannot forward answers.
func NotLeader(ctx context.Context, leaderID, leaderAddr string, inHeader bool) error {
	md := metadata.Pairs(mdLeaderID, leaderID, mdLeaderGRPC, leaderAddr, mdOutcome, "none")
	if inHeader {
		_ = grpc.SetHeader(ctx, md)
	} else {
		_ = grpc.SetTrailer(ctx, md)
	}
	return status.Errorf(codes.Unavailable, "not the leader; leader is %s", leaderID)
}

// OutcomeUnknown sets "coordd-outcome: unknown" in the trailer and returns
// the Unavailable error of a write whose outcome is unknown.
func OutcomeUnknown(ctx context.Context) error {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(mdOutcome, "unknown"))
	return status.Error(codes.Unavailable, "leadership lost; outcome unknown")
}

// Overloaded sets the retry hint ("coordd-retry-after-ms") in the trailer
// and returns the ResourceExhausted error of a member whose proposal queue
// is full.
func Overloaded(ctx context.Context, retryAfter time.Duration) error {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(mdRetryAfter, strconv.FormatInt(retryAfter.Milliseconds(), 10)))
	return status.Error(codes.ResourceExhausted, "proposal queue is full: retry later")
}

// DownAddr returns a loopback address nothing listens on.
func DownAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// before counts the call, runs the hook and, on a follower that does not
// forward, refuses leader-only calls.
func (n *Node) before(ctx context.Context, method string, req any) error {
	n.mu.Lock()
	n.hits[method]++
	call, hook := n.hits[method], n.hook
	n.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, method, call); err != nil {
			return err
		}
	}
	if !leaderOnly(method, req) {
		return nil
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader >= 0 && c.Nodes[c.leader] == n {
		return nil
	}
	if c.leader < 0 {
		return status.Error(codes.Unavailable, "no leader")
	}
	if c.forward {
		return nil
	}
	l := c.Nodes[c.leader]
	return NotLeader(ctx, l.ID, l.Addr, false)
}

func leaderOnly(method string, req any) bool {
	switch method {
	case "Status", "WatchAssignments":
		return false
	case "Members", "ListPChannels", "ListNodes", "ListVirtualChannels", "GetBroadcast", "ListBroadcasts":
		r, _ := req.(interface {
			GetConsistency() coordpb.ReadConsistency
		})
		return r == nil || r.GetConsistency() != coordpb.ReadConsistency_STALE
	}
	return true
}

func (n *Node) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := n.before(ctx, path.Base(info.FullMethod), req); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (n *Node) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := n.before(ss.Context(), path.Base(info.FullMethod), nil); err != nil {
		return err
	}
	return h(srv, ss)
}

// membersLocked returns a copy of the configuration with leader flags.
func (c *Cluster) membersLocked() []*coordpb.Member {
	var out []*coordpb.Member
	for _, m := range c.members {
		cp := &coordpb.Member{Id: m.Id, RaftAddr: m.RaftAddr, GrpcAddr: m.GrpcAddr, HttpAddr: m.HttpAddr, Suffrage: m.Suffrage}
		cp.Leader = c.leader >= 0 && c.Nodes[c.leader].ID == m.Id
		out = append(out, cp)
	}
	return out
}

// Status implements coordpb.ClusterServer.
func (n *Node) Status(context.Context, *coordpb.StatusRequest) (*coordpb.StatusResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &coordpb.StatusResponse{
		NodeId: n.ID, State: "Follower", Term: c.term,
		CommitIndex: CommitIndex, AppliedIndex: AppliedIndex, LastLogIndex: LastLogIndex,
		LastSnapshotIndex: SnapshotIndex, Members: c.membersLocked(),
	}
	if c.leader >= 0 {
		l := c.Nodes[c.leader]
		resp.LeaderId, resp.LeaderGrpcAddr, resp.EstablishedTerm = l.ID, l.Addr, c.term
		if l == n {
			resp.State = "Leader"
		}
	} else {
		resp.State = "Candidate"
	}
	return resp, nil
}

// Members implements coordpb.ClusterServer.
func (n *Node) Members(context.Context, *coordpb.MembersRequest) (*coordpb.MembersResponse, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	return &coordpb.MembersResponse{Members: n.c.membersLocked()}, nil
}

// AddVoter implements coordpb.ClusterServer.
func (n *Node) AddVoter(_ context.Context, req *coordpb.AddVoterRequest) (*coordpb.AddVoterResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.GetId() == "" || req.GetRaftAddr() == "" {
		return nil, status.Error(codes.InvalidArgument, "id and raft_addr are required")
	}
	i := slices.IndexFunc(c.members, func(m *coordpb.Member) bool { return m.Id == req.GetId() })
	if i >= 0 && c.members[i].RaftAddr != req.GetRaftAddr() {
		return nil, status.Errorf(codes.AlreadyExists, "member %s exists with raft address %s", req.GetId(), c.members[i].RaftAddr)
	}
	if i < 0 {
		c.members = append(c.members, &coordpb.Member{Id: req.GetId(), RaftAddr: req.GetRaftAddr(),
			GrpcAddr: req.GetGrpcAddr(), HttpAddr: req.GetHttpAddr(), Suffrage: "voter"})
	}
	return &coordpb.AddVoterResponse{Members: c.membersLocked()}, nil
}

// RemoveMember implements coordpb.ClusterServer.
func (n *Node) RemoveMember(_ context.Context, req *coordpb.RemoveMemberRequest) (*coordpb.RemoveMemberResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.members, func(m *coordpb.Member) bool { return m.Id == req.GetId() })
	if i < 0 {
		return nil, status.Errorf(codes.NotFound, "member %q not found", req.GetId())
	}
	c.members = slices.Delete(c.members, i, i+1)
	return &coordpb.RemoveMemberResponse{Members: c.membersLocked()}, nil
}

// TransferLeader implements coordpb.ClusterServer.
func (n *Node) TransferLeader(_ context.Context, req *coordpb.TransferLeaderRequest) (*coordpb.TransferLeaderResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	next := (c.leader + 1) % len(c.Nodes)
	if id := req.GetTargetId(); id != "" {
		next = slices.IndexFunc(c.Nodes, func(x *Node) bool { return x.ID == id })
		if next < 0 {
			return nil, status.Errorf(codes.NotFound, "member %q not found", id)
		}
	}
	c.leader = next
	c.term++
	return &coordpb.TransferLeaderResponse{LeaderId: c.Nodes[next].ID, Term: c.term}, nil
}

// RegisterMember implements coordpb.ClusterServer.
func (n *Node) RegisterMember(context.Context, *coordpb.RegisterMemberRequest) (*coordpb.RegisterMemberResponse, error) {
	return &coordpb.RegisterMemberResponse{}, nil
}

// Snapshot implements coordpb.ClusterServer; it streams the snapshot bytes
// in small chunks.
func (n *Node) Snapshot(_ *coordpb.SnapshotRequest, ss grpc.ServerStreamingServer[coordpb.SnapshotChunk]) error {
	n.c.mu.Lock()
	data := slices.Clone(n.c.snapshot)
	n.c.mu.Unlock()
	for len(data) > 0 {
		k := min(snapshotChunkSz, len(data))
		if err := ss.Send(&coordpb.SnapshotChunk{Data: data[:k]}); err != nil {
			return err
		}
		data = data[k:]
	}
	return nil
}

func (c *Cluster) alloc(next *uint64, count uint32) (uint64, error) {
	if count == 0 || count > 1<<16 {
		return 0, status.Errorf(codes.InvalidArgument, "count must be in 1..65536, got %d", count)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	first := *next
	*next += uint64(count)
	return first, nil
}

// AllocTimestamp implements coordpb.AllocatorServer.
func (n *Node) AllocTimestamp(_ context.Context, req *coordpb.AllocTimestampRequest) (*coordpb.AllocTimestampResponse, error) {
	first, err := n.c.alloc(&n.c.nextTS, req.GetCount())
	if err != nil {
		return nil, err
	}
	return &coordpb.AllocTimestampResponse{First: first, Count: req.GetCount()}, nil
}

// AllocID implements coordpb.AllocatorServer.
func (n *Node) AllocID(_ context.Context, req *coordpb.AllocIDRequest) (*coordpb.AllocIDResponse, error) {
	first, err := n.c.alloc(&n.c.nextID, req.GetCount())
	if err != nil {
		return nil, err
	}
	return &coordpb.AllocIDResponse{First: first, Count: req.GetCount()}, nil
}
