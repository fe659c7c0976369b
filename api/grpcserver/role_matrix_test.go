package grpcserver

import (
	"context"
	"errors"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/fsm"
)

// The credential kinds of the role matrix, in the order of the expectation
// strings below.
var matrixKinds = []string{"none", "read", "proxy", "owner", "other", "admin"}

// matrixExpect is the hand-written expectation of TestRoleMatrix: for each
// method, one letter per credential kind of matrixKinds — U
// (Unauthenticated), D (PermissionDenied) or P (past authorisation: any
// other answer). It is deliberately NOT derived from api/auth's table, so a
// wrong table row fails the test. "owner" is the node token bound to the
// identity session 1 was registered with, "other" one bound to another
// identity. Requests name session 1 wherever a method names a node.
var matrixExpect = map[string]string{}

func expect(pattern string, methods ...string) {
	for _, m := range methods {
		matrixExpect[m] = pattern
	}
}

func init() {
	// Probes and reflection.
	expect("PPPPPP", "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch", "/grpc.health.v1.Health/List")
	expect("UPPPPP", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
	// Reads: any credential.
	expect("UPPPPP",
		"/coordd.v1.Cluster/Status", "/coordd.v1.Cluster/Members",
		"/coordd.v1.Channels/ListPChannels", "/coordd.v1.Channels/ListNodes", "/coordd.v1.Channels/ListVirtualChannels",
		"/coordd.v1.Channels/GetReplicateConfiguration", "/coordd.v1.Channels/WatchAssignments",
		"/coordd.v1.Broadcaster/GetBroadcast", "/coordd.v1.Broadcaster/ListBroadcasts",
		"/coordd.v1.DataCoord/GetFlushState", "/coordd.v1.DataCoord/GetFlushAllState", "/coordd.v1.DataCoord/GetSegmentInfo",
		"/coordd.v1.DataCoord/ListSegments", "/coordd.v1.DataCoord/ListChannelCheckpoints",
		"/coordd.v1.ManifestService/GetSegmentManifest", "/coordd.v1.Diagnostics/GetLogLevel")
	// What proxies call: proxies, nodes (which are proxies too) and admins.
	expect("UDPPPP",
		"/coordd.v1.Allocator/AllocTimestamp", "/coordd.v1.Allocator/AllocID",
		"/coordd.v1.Channels/AllocVirtualChannels", "/coordd.v1.Channels/DropVirtualChannels",
		"/coordd.v1.Channels/ReportAssignmentError", "/coordd.v1.Broadcaster/Broadcast",
		"/coordd.v1.DataCoord/GetRecoveryInfo", "/coordd.v1.DataCoord/Flush", "/coordd.v1.DataCoord/FlushAll",
		"/coordd.v1.ManifestService/CommitSegmentManifest", "/coordd.v1.ManifestService/CommitSegmentManifestBatch")
	// Speaking for session 1: only its own node credential. Not admin.
	expect("UDDPDD",
		"/coordd.v1.StreamingNodeRegistry/Heartbeat", "/coordd.v1.StreamingNodeRegistry/RequestDrain",
		"/coordd.v1.StreamingNodeRegistry/Deregister", "/coordd.v1.Broadcaster/Ack",
		"/coordd.v1.DataCoord/AssignSegmentID", "/coordd.v1.DataCoord/ReportTimeTicks",
		"/coordd.v1.DataCoord/WatchFlushTasks", "/coordd.v1.DataCoord/SaveBinlogPaths",
		"/coordd.v1.DataCoord/CreateImportSegment", "/coordd.v1.DataCoord/FinishImportSegment",
		"/coordd.v1.DataCoord/UpdateChannelCheckpoints")
	// Registering: any node credential (for its own identity), nothing else.
	expect("UDDPPD", "/coordd.v1.StreamingNodeRegistry/RegisterStreamingNode")
	// Operators only.
	expect("UDDDDP",
		"/coordd.v1.Cluster/AddVoter", "/coordd.v1.Cluster/RemoveMember", "/coordd.v1.Cluster/TransferLeader",
		"/coordd.v1.Cluster/RegisterMember", "/coordd.v1.Cluster/Snapshot",
		"/coordd.v1.Channels/AddPChannels", "/coordd.v1.Channels/Rebalance", "/coordd.v1.Channels/DrainNode",
		"/coordd.v1.Channels/UndrainNode", "/coordd.v1.Channels/UpdateReplicateConfiguration",
		"/coordd.v1.Channels/ResetReplicateRole",
		"/coordd.v1.Broadcaster/RetryBroadcast", "/coordd.v1.Broadcaster/AbandonBroadcast",
		"/coordd.v1.ManifestService/CollectManifestOrphans",
		"/coordd.v1.Diagnostics/SetLogLevel", "/coordd.v1.Diagnostics/RecentErrors",
		"/coordd.v1.Backup/SaveSnapshot",
		"/coordd.v1.Tokens/CreateToken", "/coordd.v1.Tokens/ListTokens", "/coordd.v1.Tokens/RevokeToken")
}

// ownedCluster is a secured one-member cluster with two streaming node
// sessions registered by two node identities: session 1 (identity 1) holds
// dml_0, session 2 (identity 2) holds dml_1, both at PChannel term 2, and
// collection 100 has a VChannel on each. Tokens: read, proxy, node 1
// ("owner" of session 1), node 2 ("other"), admin, and an unbound node token
// written by a v1 entry ("legacy").
type ownedCluster struct {
	tn     *testNode
	tokens map[string]string
	epoch1 uint64
	beats  *heartbeatLog
}

// heartbeatLog is the server's NodeHealth in these tests: it records which
// sessions' heartbeats were accepted (the real tracker also refreshes every
// live session when a leadership starts, which would hide a forged one).
type heartbeatLog struct {
	mu   sync.Mutex
	seen map[uint64]int
}

func (h *heartbeatLog) HeartbeatHeld(node, _ uint64, _ fsm.AssignmentVersion, _ map[string]int64, _ time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[node]++
}

func (h *heartbeatLog) LastSeen(node uint64) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return 0, h.seen[node] > 0
}

func (h *heartbeatLog) TTL() time.Duration { return time.Minute }

func (h *heartbeatLog) SilentAfter(uint64) time.Duration { return 30 * time.Second }

func startOwnedCluster(t *testing.T, withBroadcaster bool) *ownedCluster {
	t.Helper()
	beats := &heartbeatLog{seen: map[uint64]int{}}
	rc := routines.Config{Data: flush.Config{AllocationExpiry: time.Minute, Interval: 20 * time.Millisecond}}
	if withBroadcaster {
		// A node's Ack then goes through the manager's own proposal, which
		// must carry the caller's stamp like a handler's.
		rc.Broadcaster = &broadcaster.Config{}
	}
	rc.Doubles.Sessions = beats
	tn := startTestNodeCfg(t, rc, WithAuth())
	propose := func(c commands.Command) {
		t.Helper()
		res, err := tn.node.Propose(callCtx(t), c)
		if err != nil || res.Rejection != nil {
			t.Fatalf("setup %s: %v %v", c.Type, err, res.GetRejection())
		}
	}
	mustNew := func(body proto.Message) commands.Command {
		t.Helper()
		c, err := commands.New(body, "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, body := range []proto.Message{
		&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0", "dml_1"}},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9001", Incarnation: "a", BoundNode: 1},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9002", Incarnation: "b", BoundNode: 2},
		&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "dml_0", NodeId: 1, ExpectedTerm: 1}, {Pchannel: "dml_1", NodeId: 2, ExpectedTerm: 1}}},
		&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}, {Pchannel: "dml_1", Term: 2}}},
		&logpb.AllocVirtualChannels{CollectionId: dataColl, Count: 2},
	} {
		propose(mustNew(body))
	}
	oc := &ownedCluster{tn: tn, tokens: map[string]string{}, beats: beats}
	for kind, rec := range map[string]*logpb.TokenRecord{
		"read":   {Role: logpb.TokenRole_TOKEN_ROLE_READ},
		"proxy":  {Role: logpb.TokenRole_TOKEN_ROLE_PROXY},
		"owner":  {Role: logpb.TokenRole_TOKEN_ROLE_NODE, NodeId: 1},
		"other":  {Role: logpb.TokenRole_TOKEN_ROLE_NODE, NodeId: 2},
		"admin":  {Role: logpb.TokenRole_TOKEN_ROLE_ADMIN},
		"legacy": {Role: logpb.TokenRole_TOKEN_ROLE_NODE},
	} {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		rec.Id, rec.Name, rec.SecretSha256 = tok.ID, kind, tok.SecretHash()
		c := mustNew(&logpb.CreateToken{Token: rec})
		if kind == "legacy" {
			c.Version = 1 // as written before per-node identity
		}
		propose(c)
		oc.tokens[kind] = tok.String()
	}
	n, ok := tn.node.State().StreamingNode(1)
	if !ok || n.BoundNode != 1 {
		t.Fatalf("session 1: %v %v", n, ok)
	}
	oc.epoch1 = n.Epoch
	return oc
}

// as returns ctx carrying the bearer token of kind ("none": nothing).
func (oc *ownedCluster) as(ctx context.Context, kind string) context.Context {
	if kind == "none" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+oc.tokens[kind])
}

// nodeRequests are well-formed requests that speak for session 1 about its
// VChannel dv0, so that the owner's call is past every shape check and
// another credential can only be refused for who it is.
func (oc *ownedCluster) nodeRequests() map[string]proto.Message {
	pos := &coordpb.Position{Term: 2, Offset: 1, Timestamp: 100}
	reqs := milvusNodeRequests() // the Milvus services' (milvus_role_matrix_test.go)
	for m, r := range map[string]proto.Message{
		"/coordd.v1.StreamingNodeRegistry/RegisterStreamingNode": &coordpb.RegisterStreamingNodeRequest{Address: "127.0.0.1:9003", Incarnation: "c"},
		"/coordd.v1.StreamingNodeRegistry/Heartbeat":             &coordpb.HeartbeatRequest{NodeId: 1, Epoch: oc.epoch1},
		"/coordd.v1.StreamingNodeRegistry/RequestDrain":          &coordpb.NodeSessionRequest{NodeId: 1, Epoch: oc.epoch1},
		"/coordd.v1.StreamingNodeRegistry/Deregister":            &coordpb.NodeSessionRequest{NodeId: 1, Epoch: oc.epoch1},
		"/coordd.v1.Broadcaster/Ack": &coordpb.AckRequest{BroadcastId: 1, NodeId: 1, Epoch: oc.epoch1,
			Checkpoints: []*coordpb.Checkpoint{{Vchannel: dv0, Term: 2, Offset: 1, TimeTick: 100}}},
		"/coordd.v1.DataCoord/AssignSegmentID": &coordpb.AssignSegmentIDRequest{NodeId: 1, Requests: []*coordpb.SegmentIDRequest{
			{CollectionId: dataColl, PartitionId: 1, Vchannel: dv0, PchannelTerm: 2, Rows: 1, Bytes: 10}}},
		"/coordd.v1.DataCoord/ReportTimeTicks": &coordpb.ReportTimeTicksRequest{NodeId: 1,
			Ticks: []*coordpb.ChannelTimeTick{{Vchannel: dv0, PchannelTerm: 2, TimeTick: 100}}},
		"/coordd.v1.DataCoord/WatchFlushTasks": &coordpb.WatchFlushTasksRequest{NodeId: 1, Epoch: oc.epoch1},
		"/coordd.v1.DataCoord/SaveBinlogPaths": &coordpb.SaveBinlogPathsRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2,
			SegmentId: 1, CollectionId: dataColl, PartitionId: 1},
		"/coordd.v1.DataCoord/CreateImportSegment": &coordpb.CreateImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2,
			CollectionId: dataColl, PartitionId: 1, RequestId: "import-1"},
		"/coordd.v1.DataCoord/FinishImportSegment": &coordpb.FinishImportSegmentRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2,
			SegmentId: 1, CollectionId: dataColl, ManifestPath: `{"ver":1,"base_path":"x"}`, RequestId: "finish-1"},
		"/coordd.v1.DataCoord/UpdateChannelCheckpoints": &coordpb.UpdateChannelCheckpointsRequest{NodeId: 1,
			Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: dv0, PchannelTerm: 2, Position: pos}}},
	} {
		reqs[m] = r
	}
	return reqs
}

// invoke calls method with req (an empty one when nil) and returns the
// status code; server streams are read for one message.
func invoke(ctx context.Context, conn *grpc.ClientConn, method string, md protoreflect.MethodDescriptor, req proto.Message) codes.Code {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if req == nil {
		req = dynamicpb.NewMessage(md.Input())
	}
	resp := dynamicpb.NewMessage(md.Output())
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		return status.Code(conn.Invoke(ctx, method, req, resp))
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, method)
	if err != nil {
		return status.Code(err)
	}
	if err := s.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return status.Code(err)
	}
	_ = s.CloseSend()
	err = s.RecvMsg(resp)
	if errors.Is(err, io.EOF) {
		return codes.OK
	}
	return status.Code(err)
}

func outcome(c codes.Code) byte {
	switch c {
	case codes.Unauthenticated:
		return 'U'
	case codes.PermissionDenied:
		return 'D'
	}
	return 'P'
}

// TestRoleMatrix calls every registered method with every credential kind
// and compares the outcome with matrixExpect, which is written by hand and
// independent of api/auth's table. A legacy node token (no node ID) must
// behave exactly like a proxy token. Refusals run first and must change
// nothing: no log entry, no heartbeat recorded.
func TestRoleMatrix(t *testing.T) {
	oc := startOwnedCluster(t, false)
	tn := oc.tn
	methods := registeredMethods(t, tn.grpc)
	var names []string
	for m := range methods {
		if strings.HasPrefix(m, "/coordd.v1.StreamingNodeService/") {
			continue // the streaming node's own service, registered only for its descriptors
		}
		if _, ok := matrixExpect[m]; !ok {
			t.Errorf("method %s has no hand-written expectation in matrixExpect", m)
		}
		names = append(names, m)
	}
	// Session 1 ends last: its drain and deregistration come after every
	// other call that speaks for it.
	last := map[string]int{"/coordd.v1.StreamingNodeRegistry/RequestDrain": 1, "/coordd.v1.StreamingNodeRegistry/Deregister": 2}
	sort.Slice(names, func(i, j int) bool {
		if last[names[i]] != last[names[j]] {
			return last[names[i]] < last[names[j]]
		}
		return names[i] < names[j]
	})
	reqs := oc.nodeRequests()
	ctx := context.Background() // invoke bounds each call on its own
	calls := 0
	run := func(refusals bool) {
		for _, m := range names {
			want := matrixExpect[m]
			kinds := append(append([]string(nil), matrixKinds...), "legacy")
			for _, kind := range kinds {
				i := indexOf(matrixKinds, kind)
				if kind == "legacy" {
					i = indexOf(matrixKinds, "proxy")
				}
				if len(want) != len(matrixKinds) {
					continue
				}
				if (want[i] != 'P') != refusals {
					continue
				}
				calls++
				start := time.Now()
				code := invoke(oc.as(ctx, kind), tn.conn, m, methods[m], reqs[m])
				if d := time.Since(start); d > time.Second {
					t.Logf("%s as %s took %v (%v)", m, kind, d.Round(time.Millisecond), code)
				}
				got := outcome(code)
				if got != want[i] {
					t.Errorf("%s as %s: %c, want %c", m, kind, got, want[i])
				}
			}
		}
	}
	before := tn.node.State().AppliedIndex()
	run(true)
	if after := tn.node.State().AppliedIndex(); after != before {
		t.Errorf("refused calls moved the applied index from %d to %d", before, after)
	}
	if _, seen := oc.beats.LastSeen(1); seen {
		t.Error("a refused heartbeat was recorded for session 1")
	}
	run(false)
	if _, seen := oc.beats.LastSeen(1); !seen {
		t.Error("the owner's heartbeat was not recorded")
	}
	t.Logf("%d methods, %d calls", len(names), calls)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
