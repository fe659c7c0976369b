package grpcserver

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/testutil"
	"github.com/coordd/coordd/vocab"
)

// TestNodeIdentityThroughForwarding: a node's call sent to a follower is
// forwarded to the leader with the node's identity, so the owner's own
// credential works through any member and another node's does not; the
// forwarding metadata sent by a client (a proxy or node 2 claiming to be
// node 1) is ignored, at the leader and at a follower alike.
func TestNodeIdentityThroughForwarding(t *testing.T) {
	ms := startSecureCluster(t, 3)
	leader, follower := ms[0], ms[1]
	for _, body := range []proto.Message{
		&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0"}},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9001", Incarnation: "a", BoundNode: 1},
		&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "dml_0", NodeId: 1, ExpectedTerm: 1}}},
		&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}}},
		&logpb.AllocVirtualChannels{CollectionId: dataColl, Count: 1},
	} {
		c, err := commands.New(body, "")
		if err != nil {
			t.Fatal(err)
		}
		if res, err := leader.node.Propose(callCtx(t), c); err != nil || res.Rejection != nil {
			t.Fatalf("setup %s: %v %v", c.Type, err, res.GetRejection())
		}
	}
	tokens := map[string]auth.Token{"proxy": createTokenOn(t, leader.node, logpb.TokenRole_TOKEN_ROLE_PROXY, "proxy")}
	for name, node := range map[string]uint64{"node1": 1, "node2": 2} {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		c, err := commands.New(&logpb.CreateToken{Token: &logpb.TokenRecord{Id: tok.ID, Name: name, Role: logpb.TokenRole_TOKEN_ROLE_NODE,
			NodeId: node, SecretSha256: tok.SecretHash()}}, "")
		if err != nil {
			t.Fatal(err)
		}
		if res, err := leader.node.Propose(callCtx(t), c); err != nil || res.Rejection != nil {
			t.Fatalf("create %s: %v %v", name, err, res.GetRejection())
		}
		tokens[name] = tok
	}
	testutil.Eventually(t, "the follower to apply the setup", func() bool {
		for _, tok := range tokens {
			if _, ok := follower.node.State().Token(tok.ID); !ok {
				return false
			}
		}
		return true
	})
	n, _ := leader.node.State().StreamingNode(1)
	checkpoint := func(m *secureMember, who string, forged bool, offset uint64) error {
		md := []string{"authorization", "Bearer " + tokens[who].String()}
		if forged {
			md = append(md, auth.MDCallerRole, "node", auth.MDCallerNode, "1")
		}
		ctx := metadata.AppendToOutgoingContext(callCtx(t), md...)
		_, err := coordpb.NewDataCoordClient(m.conn).UpdateChannelCheckpoints(ctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: 1,
			Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: vocab.VChannelName("dml_0", dataColl, 0), PchannelTerm: 2,
				Position: &coordpb.Position{Term: 2, Offset: offset, Timestamp: 100 + offset}}}})
		return err
	}
	before := leader.node.State().AppliedIndex()
	for _, m := range []*secureMember{follower, leader} {
		for _, who := range []string{"proxy", "node2"} {
			for _, forged := range []bool{false, true} {
				if err := checkpoint(m, who, forged, 1<<40); status.Code(err) != codes.PermissionDenied {
					t.Errorf("%s via %s (forged caller metadata %v): %v, want PermissionDenied", who, m.self.ID, forged, err)
				}
			}
		}
	}
	if after := leader.node.State().AppliedIndex(); after != before {
		t.Errorf("refused calls moved the applied index from %d to %d", before, after)
	}
	// The owner, through the follower: forwarded with its identity.
	if err := checkpoint(follower, "node1", false, 1); err != nil {
		t.Fatalf("node 1's checkpoint through the follower: %v", err)
	}
	hb := metadata.AppendToOutgoingContext(callCtx(t), "authorization", "Bearer "+tokens["node1"].String())
	if _, err := coordpb.NewStreamingNodeRegistryClient(follower.conn).Heartbeat(hb, &coordpb.HeartbeatRequest{NodeId: 1, Epoch: n.Epoch}); err != nil {
		t.Fatalf("node 1's heartbeat through the follower: %v", err)
	}
	if cp, ok := leader.node.State().ChannelCheckpoint(vocab.VChannelName("dml_0", dataColl, 0)); !ok || cp.Position.Offset != 1 {
		t.Fatalf("checkpoint after the owner's call: %+v %v", cp, ok)
	}
}
