package grpcserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
)

// observed is the part of a node's state that a rejected call must leave
// alone. The TSO window limit is left out: the leader routine moves it on
// its own.
type observed struct {
	Members  []string // FSM directory, one "id raft grpc http" line each
	NextID   uint64
	DedupLen int
	Config   []raftnode.Server
	Leader   string
	Term     uint64
}

func observe(t *testing.T, n *raftnode.Node) observed {
	t.Helper()
	st := n.State()
	var o observed
	for _, m := range st.Members() {
		o.Members = append(o.Members, fmt.Sprintf("%s %s %s %s", m.Id, m.RaftAddr, m.GrpcAddr, m.HttpAddr))
	}
	o.NextID, o.DedupLen = st.NextID(), st.DedupLen()
	cfg, err := n.Configuration()
	if err != nil {
		t.Fatalf("read raft configuration: %v", err)
	}
	o.Config = cfg
	o.Leader, _ = n.Leader()
	o.Term = n.Raft().CurrentTerm()
	return o
}

// TestBadInputChangesNothing sends invalid requests to every RPC that takes
// input and checks each gets the documented status code with a clear message,
// and leaves the FSM and the raft configuration untouched
// (docs/architecture.md#rules, rule 6).
func TestBadInputChangesNothing(t *testing.T) {
	tn := startTestNode(t)
	self := tn.self
	long := strings.Repeat("x", 65)
	good := func(r *coordpb.AddVoterRequest) *coordpb.AddVoterRequest {
		if r.GrpcAddr == "" {
			r.GrpcAddr = "127.0.0.1:9001"
		}
		return r
	}
	addVoter := func(r *coordpb.AddVoterRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := tn.cluster.AddVoter(ctx, good(r)); return err }
	}
	register := func(r *coordpb.RegisterMemberRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := tn.cluster.RegisterMember(ctx, r); return err }
	}
	remove := func(id string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := tn.cluster.RemoveMember(ctx, &coordpb.RemoveMemberRequest{Id: id})
			return err
		}
	}
	transfer := func(id string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := tn.cluster.TransferLeader(ctx, &coordpb.TransferLeaderRequest{TargetId: id})
			return err
		}
	}
	allocTS := func(n uint32) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := tn.alloc.AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: n})
			return err
		}
	}
	allocID := func(n uint32) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := tn.alloc.AllocID(ctx, &coordpb.AllocIDRequest{Count: n})
			return err
		}
	}

	tests := []struct {
		name    string
		call    func(context.Context) error
		code    codes.Code
		message string // a substring the status message must contain
	}{
		{"AllocTimestamp/count 0", allocTS(0), codes.InvalidArgument, "count must be in 1..65536, got 0"},
		{"AllocTimestamp/count 65537", allocTS(65537), codes.InvalidArgument, "count must be in 1..65536, got 65537"},
		{"AllocID/count 0", allocID(0), codes.InvalidArgument, "count must be in 1..65536, got 0"},
		{"AllocID/count 65537", allocID(65537), codes.InvalidArgument, "count must be in 1..65536, got 65537"},

		{"AddVoter/empty id", addVoter(&coordpb.AddVoterRequest{Id: "", RaftAddr: "127.0.0.1:7"}), codes.InvalidArgument, "member id must be 1..64 bytes, got 0"},
		{"AddVoter/id with space", addVoter(&coordpb.AddVoterRequest{Id: "a b", RaftAddr: "127.0.0.1:7"}), codes.InvalidArgument, "not allowed"},
		{"AddVoter/65-byte id", addVoter(&coordpb.AddVoterRequest{Id: long, RaftAddr: "127.0.0.1:7"}), codes.InvalidArgument, "got 65"},
		{"AddVoter/raft addr without port", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: "nohost"}), codes.InvalidArgument, `raft_addr "nohost"`},
		{"AddVoter/raft port 0", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: "h:0"}), codes.InvalidArgument, "port must be 1..65535"},
		{"AddVoter/raft port 99999", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: "h:99999"}), codes.InvalidArgument, "port must be 1..65535"},
		{"AddVoter/raft addr empty", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: ""}), codes.InvalidArgument, "raft_addr is required"},
		{"AddVoter/member of another cluster", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: "127.0.0.1:7", ClusterId: "other"}), codes.FailedPrecondition, "member n2 belongs to cluster other"},
		{"AddVoter/existing member from a data dir that never joined", addVoter(&coordpb.AddVoterRequest{Id: self.ID, RaftAddr: self.RaftAddr, Joining: true}), codes.FailedPrecondition, "is already in the cluster but its data dir never joined it"},
		{"AddVoter/raft addr empty host", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: ":7000"}), codes.InvalidArgument, "host is empty"},
		{"AddVoter/bad grpc addr", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: "127.0.0.1:7", GrpcAddr: "h:0"}), codes.InvalidArgument, "grpc_addr"},
		{"AddVoter/bad http addr", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: "127.0.0.1:7", HttpAddr: "nohost"}), codes.InvalidArgument, "http_addr"},
		{"AddVoter/raft addr of another member", addVoter(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: self.RaftAddr}), codes.FailedPrecondition, "already used by member n1"},

		{"RemoveMember/unknown id", remove("ghost"), codes.NotFound, `"ghost" is not in the cluster`},
		{"RemoveMember/invalid id", remove("a b"), codes.InvalidArgument, "not allowed"},
		{"RemoveMember/empty id", remove(""), codes.InvalidArgument, "member id must be 1..64 bytes"},

		{"TransferLeader/unknown target", transfer("ghost"), codes.NotFound, `"ghost" is not in the cluster`},
		{"TransferLeader/to itself", transfer(self.ID), codes.FailedPrecondition, "already leads"},
		{"TransferLeader/invalid target", transfer("a/b"), codes.InvalidArgument, "not allowed"},

		{"RegisterMember/not a member", register(&coordpb.RegisterMemberRequest{Id: "ghost", RaftAddr: "127.0.0.1:7", GrpcAddr: "127.0.0.1:8", HttpAddr: "127.0.0.1:9"}), codes.NotFound, `"ghost" is not in the cluster`},
		{"RegisterMember/bad http addr", register(&coordpb.RegisterMemberRequest{Id: self.ID, RaftAddr: self.RaftAddr, GrpcAddr: self.GRPCAddr, HttpAddr: "h:0"}), codes.InvalidArgument, "http_addr"},
		{"RegisterMember/http addr without port", register(&coordpb.RegisterMemberRequest{Id: self.ID, RaftAddr: self.RaftAddr, GrpcAddr: self.GRPCAddr, HttpAddr: "nohost"}), codes.InvalidArgument, "http_addr"},
		{"RegisterMember/bad grpc addr", register(&coordpb.RegisterMemberRequest{Id: self.ID, RaftAddr: self.RaftAddr, GrpcAddr: "h:99999", HttpAddr: self.HTTPAddr}), codes.InvalidArgument, "grpc_addr"},
		{"RegisterMember/no raft addr", register(&coordpb.RegisterMemberRequest{Id: self.ID, GrpcAddr: self.GRPCAddr, HttpAddr: self.HTTPAddr}), codes.InvalidArgument, "raft_addr is required"},
		{"RegisterMember/invalid id", register(&coordpb.RegisterMemberRequest{Id: long, RaftAddr: self.RaftAddr}), codes.InvalidArgument, "member id must be 1..64 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := observe(t, tn.node)
			err := tc.call(callCtx(t))
			st, ok := status.FromError(err)
			if err == nil || !ok {
				t.Fatalf("got error %v; want a %v status", err, tc.code)
			}
			if st.Code() != tc.code {
				t.Errorf("code = %v (%q); want %v", st.Code(), st.Message(), tc.code)
			}
			if !strings.Contains(st.Message(), tc.message) {
				t.Errorf("message %q does not contain %q", st.Message(), tc.message)
			}
			if after := observe(t, tn.node); !reflect.DeepEqual(before, after) {
				t.Errorf("a rejected call changed state:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// TestAllocTimestampIncreases checks consecutive calls return increasing,
// non-overlapping timestamp ranges.
func TestAllocTimestampIncreases(t *testing.T) {
	tn := startTestNode(t)
	var prevLast uint64
	for k, count := range []uint32{1, 2, 1000, 65536, 1, 7, 65536, 65536, 65536, 3, 1} {
		resp, err := tn.alloc.AllocTimestamp(callCtx(t), &coordpb.AllocTimestampRequest{Count: count})
		if err != nil {
			t.Fatalf("call %d: AllocTimestamp(%d): %v", k, count, err)
		}
		if resp.Count != count {
			t.Errorf("call %d: count = %d; want %d", k, resp.Count, count)
		}
		if k > 0 && resp.First <= prevLast {
			t.Errorf("call %d: first %d is not above the previous call's last %d", k, resp.First, prevLast)
		}
		prevLast = resp.First + uint64(count) - 1
	}
}

// TestAllocIDRanges checks ID ranges are increasing and disjoint, and all
// below the FSM's first unreserved ID.
func TestAllocIDRanges(t *testing.T) {
	tn := startTestNode(t)
	var prevEnd uint64 // exclusive
	for k, count := range []uint32{1, 1, 5000, 4999, 2, 65536, 1, 65536, 10} {
		resp, err := tn.alloc.AllocID(callCtx(t), &coordpb.AllocIDRequest{Count: count})
		if err != nil {
			t.Fatalf("call %d: AllocID(%d): %v", k, count, err)
		}
		if resp.Count != count || resp.First == 0 {
			t.Errorf("call %d: got first %d count %d; want a nonzero first and count %d", k, resp.First, resp.Count, count)
		}
		if resp.First < prevEnd {
			t.Errorf("call %d: range [%d, %d) overlaps or precedes the previous one ending at %d", k, resp.First, resp.First+uint64(count), prevEnd)
		}
		prevEnd = resp.First + uint64(count)
		if next := tn.node.State().NextID(); prevEnd > next {
			t.Errorf("call %d: range ends at %d, beyond the reserved limit %d", k, prevEnd, next)
		}
	}
	// Small calls are served from the same reservation: back to back.
	a, err := tn.alloc.AllocID(callCtx(t), &coordpb.AllocIDRequest{Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tn.alloc.AllocID(callCtx(t), &coordpb.AllocIDRequest{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if b.First != a.First+3 {
		t.Errorf("consecutive small calls: second first = %d; want %d", b.First, a.First+3)
	}
}

func TestStatus(t *testing.T) {
	tn := startTestNode(t)
	resp, err := tn.cluster.Status(callCtx(t), &coordpb.StatusRequest{})
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if resp.NodeId != tn.self.ID || resp.State != "Leader" || resp.LeaderId != tn.self.ID || resp.LeaderGrpcAddr != tn.self.GRPCAddr {
		t.Errorf("node_id %q state %q leader_id %q leader_grpc_addr %q; want %q Leader %q %q",
			resp.NodeId, resp.State, resp.LeaderId, resp.LeaderGrpcAddr, tn.self.ID, tn.self.ID, tn.self.GRPCAddr)
	}
	if resp.Term == 0 || resp.AppliedIndex == 0 || resp.CommitIndex == 0 || resp.LastLogIndex == 0 {
		t.Errorf("term %d applied %d commit %d last log %d; want all > 0", resp.Term, resp.AppliedIndex, resp.CommitIndex, resp.LastLogIndex)
	}
	if resp.EstablishedTerm != resp.Term {
		t.Errorf("established_term = %d; want the current term %d", resp.EstablishedTerm, resp.Term)
	}
	checkMembers(t, "Status", resp.Members, tn.self)
}

// checkMembers wants exactly the fixture's registered member.
func checkMembers(t *testing.T, what string, got []*coordpb.Member, self raftnode.Self) {
	t.Helper()
	want := &coordpb.Member{Id: self.ID, RaftAddr: self.RaftAddr, GrpcAddr: self.GRPCAddr, HttpAddr: self.HTTPAddr, Suffrage: "voter", Leader: true}
	if len(got) != 1 || got[0].String() != want.String() {
		t.Errorf("%s members = %v; want [%v]", what, got, want)
	}
}

func TestMembers(t *testing.T) {
	tn := startTestNode(t)
	for _, c := range []coordpb.ReadConsistency{coordpb.ReadConsistency_LINEARIZABLE, coordpb.ReadConsistency_STALE} {
		resp, err := tn.cluster.Members(callCtx(t), &coordpb.MembersRequest{Consistency: c})
		if err != nil {
			t.Fatalf("Members(%v): %v", c, err)
		}
		checkMembers(t, c.String(), resp.Members, tn.self)
	}
}

func TestSnapshotStream(t *testing.T) {
	tn := startTestNode(t)
	if _, err := tn.alloc.AllocID(callCtx(t), &coordpb.AllocIDRequest{Count: 5}); err != nil {
		t.Fatalf("AllocID: %v", err)
	}
	stream, err := tn.cluster.Snapshot(callCtx(t), &coordpb.SnapshotRequest{})
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	var buf bytes.Buffer
	chunks := 0
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Snapshot recv: %v", err)
		}
		chunks++
		buf.Write(c.Data)
	}
	if chunks == 0 {
		t.Fatal("Snapshot sent no chunks")
	}
	st, err := fsm.ReadSnapshot(&buf)
	if err != nil {
		t.Fatalf("fsm.ReadSnapshot: %v", err)
	}
	live := tn.node.State()
	if st.AppliedIndex() == 0 || st.AppliedIndex() > live.AppliedIndex() {
		t.Errorf("snapshot applied index %d; want in 1..%d", st.AppliedIndex(), live.AppliedIndex())
	}
	if st.NextID() <= 1 || st.EstablishedTerm() == 0 {
		t.Errorf("snapshot next id %d established term %d; want the allocation and the leader recorded", st.NextID(), st.EstablishedTerm())
	}
	m, ok := st.Member(tn.self.ID)
	if !ok || m.GrpcAddr != tn.self.GRPCAddr || m.HttpAddr != tn.self.HTTPAddr {
		t.Errorf("snapshot member %s = %v (%v); want the registered addresses", tn.self.ID, m, ok)
	}
}

func TestHealthServing(t *testing.T) {
	tn := startTestNode(t)
	resp, err := healthpb.NewHealthClient(tn.conn).Check(callCtx(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health Check: %v", err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health status = %v; want SERVING", resp.Status)
	}
}

func TestReflection(t *testing.T) {
	tn := startTestNode(t)
	want := []string{"coordd.v1.Allocator", "coordd.v1.Cluster", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"}

	var registered []string
	for name := range tn.grpc.GetServiceInfo() {
		registered = append(registered, name)
	}
	for _, w := range want {
		if !slices.Contains(registered, w) {
			t.Errorf("GetServiceInfo lacks %s (has %v)", w, registered)
		}
	}

	stream, err := reflectionpb.NewServerReflectionClient(tn.conn).ServerReflectionInfo(callCtx(t))
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatalf("reflection send: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection recv: %v", err)
	}
	var listed []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		listed = append(listed, s.Name)
	}
	for _, w := range want {
		if !slices.Contains(listed, w) {
			t.Errorf("reflection ListServices lacks %s (has %v)", w, listed)
		}
	}
	// The coordd schema itself is served, so grpcurl can call the API.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "coordd.v1.Cluster"}}); err != nil {
		t.Fatalf("reflection send: %v", err)
	}
	resp, err = stream.Recv()
	if err != nil {
		t.Fatalf("reflection recv: %v", err)
	}
	if fds := resp.GetFileDescriptorResponse().GetFileDescriptorProto(); len(fds) == 0 {
		t.Errorf("reflection has no file descriptor for coordd.v1.Cluster: %v", resp.GetErrorResponse())
	}
}
