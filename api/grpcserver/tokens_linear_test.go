package grpcserver

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/coordd/coordd/api/apitest"
	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/security"
	"github.com/coordd/coordd/testutil"
)

// secureMember is one member of an in-process secure cluster: raft over an
// in-memory transport, the API over TLS with the dev PKI's server
// certificate, forwarding with it.
type secureMember struct {
	node  *raftnode.Node
	self  raftnode.Self
	trans *raft.InmemTransport
	conn  *grpc.ClientConn // to this member, as a client holding only the CA
}

// startSecureCluster starts n members. Member 0 has the default raft
// timeouts; the others wait an hour before they suspect their leader, so
// member 0 leads, and a follower cut off from it keeps believing in it
// (and keeps forwarding to it) instead of starting an election.
func startSecureCluster(t *testing.T, n int) []*secureMember {
	t.Helper()
	pki, err := security.WriteDevPKI(filepath.Join(t.TempDir(), "pki"), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srvMat, err := security.LoadServer(pki.Server)
	if err != nil {
		t.Fatal(err)
	}
	cliMat, err := security.Load(security.Files{CA: pki.Server.CA})
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]*secureMember, n)
	var peers []raftnode.Peer
	for i := range ms {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("n%d", i+1)
		m := &secureMember{self: raftnode.Self{ID: id, RaftAddr: fmt.Sprintf("127.0.0.%d:1", i+1), GRPCAddr: lis.Addr().String(), HTTPAddr: "127.0.0.1:2"}}
		_, m.trans = raft.NewInmemTransport(raft.ServerAddress(m.self.RaftAddr))
		cfg := raftnode.Config{ID: id, DataDir: t.TempDir(), RaftAddr: m.self.RaftAddr, Transport: m.trans, Logger: testLogger(t).Named(id)}
		if i > 0 {
			cfg.HeartbeatTimeout, cfg.ElectionTimeout = time.Hour, time.Hour
		}
		if m.node, err = raftnode.Open(cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.node.Shutdown() })
		set, err := routines.New(m.node, routines.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(set.Close)
		m.node.AddLeaderRoutine(routines.Name, set.Run)
		srv := New(m.node, m.self, testLogger(t), set, WithAuth(), WithPeerTLS(srvMat.APIClient("")))
		t.Cleanup(srv.Close)
		g := grpc.NewServer(append(srv.AuthInterceptors(), grpc.Creds(credentials.NewTLS(srvMat.APIServer())))...)
		srv.Register(g)
		go func() { _ = g.Serve(lis) }()
		t.Cleanup(g.Stop)
		if m.conn, err = grpc.NewClient(m.self.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(cliMat.APIClient("")))); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.conn.Close() })
		ms[i] = m
		peers = append(peers, raftnode.Peer{ID: id, RaftAddr: m.self.RaftAddr})
	}
	for _, a := range ms {
		for _, b := range ms {
			if a != b {
				a.trans.Connect(raft.ServerAddress(b.self.RaftAddr), b.trans)
			}
		}
	}
	for _, m := range ms {
		if err := m.node.Bootstrap(peers); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(readyTimeout))
	defer cancel()
	if err := apitest.WaitEstablished(ctx, ms[0].node); err != nil {
		t.Fatal(err)
	}
	// Every member's addresses, so that followers know where to forward.
	for _, m := range ms {
		c, err := commands.New(&logpb.UpsertMember{Member: &logpb.Member{Id: m.self.ID, RaftAddr: m.self.RaftAddr,
			GrpcAddr: m.self.GRPCAddr, HttpAddr: m.self.HTTPAddr}}, "")
		if err != nil {
			t.Fatal(err)
		}
		if res, err := ms[0].node.Propose(callCtx(t), c); err != nil || res.Rejection != nil {
			t.Fatalf("register %s: %v %v", m.self.ID, err, res.GetRejection())
		}
	}
	return ms
}

// createTokenOn commits a token of role directly on the leader and returns
// it.
func createTokenOn(t *testing.T, leader *raftnode.Node, role logpb.TokenRole, name string) auth.Token {
	t.Helper()
	tok, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	c, err := commands.New(&logpb.CreateToken{Token: &logpb.TokenRecord{Id: tok.ID, Name: name, Role: role, SecretSha256: tok.SecretHash()}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := leader.Propose(callCtx(t), c); err != nil || res.Rejection != nil {
		t.Fatalf("create token %s: %v %v", name, err, res.GetRejection())
	}
	return tok
}

// TestListTokensLinearizableOnFollower: a token whose creation the leader
// acknowledged is listed at once by `token list` on a follower that has not
// applied it (here: one cut off from the leader, still believing in it). The
// follower forwards the list to the leader, which answers after a
// linearizable read; before, the follower answered from its own state and
// the new token was missing.
func TestListTokensLinearizableOnFollower(t *testing.T) {
	ms := startSecureCluster(t, 3)
	leader, lagging := ms[0], ms[2]
	admin := createTokenOn(t, leader.node, logpb.TokenRole_TOKEN_ROLE_ADMIN, "ops")
	testutil.Eventually(t, "the follower to apply the admin token and every member's addresses", func() bool {
		_, ok := lagging.node.State().Token(admin.ID)
		_, m := lagging.node.State().Member("n1")
		return ok && m
	})
	// Cut the follower off the raft traffic, both ways.
	for _, m := range ms[:2] {
		m.trans.Disconnect(raft.ServerAddress(lagging.self.RaftAddr))
	}
	lagging.trans.DisconnectAll()

	fresh := createTokenOn(t, leader.node, logpb.TokenRole_TOKEN_ROLE_READ, "fresh")
	if _, ok := lagging.node.State().Token(fresh.ID); ok {
		t.Fatal("the cut-off follower applied the new token; the test cannot show a stale read")
	}
	ctx := metadata.AppendToOutgoingContext(callCtx(t), "authorization", "Bearer "+admin.String())
	resp, err := coordpb.NewTokensClient(lagging.conn).ListTokens(ctx, &coordpb.ListTokensRequest{})
	if err != nil {
		t.Fatalf("token list on the follower: %v", err)
	}
	listed := false
	for _, tok := range resp.Tokens {
		listed = listed || tok.Id == fresh.ID
	}
	if !listed {
		t.Fatalf("token list on a follower misses token %s, acknowledged by the leader: %v", fresh.ID, resp.Tokens)
	}
}

// A member's token table may miss committed tokens until it has applied
// its log: a leader until it is established (a new leader has not yet
// applied what it inherited), a follower while it is not ready.
func TestTokenTableMayLag(t *testing.T) {
	ready := func(ok bool) func() (bool, string) { return func() (bool, string) { return ok, "catching up" } }
	cases := []struct {
		name        string
		leader      bool
		established uint64
		ready       bool
		want        bool
	}{
		{name: "established leader", leader: true, established: 3, ready: false, want: false},
		{name: "leader not yet established", leader: true, established: 0, ready: true, want: true},
		{name: "ready follower", leader: false, ready: true, want: false},
		{name: "follower catching up", leader: false, ready: false, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, why := tokenTableMayLag(tc.leader, tc.established, ready(tc.ready))
			if got != tc.want || (got && why == "") {
				t.Fatalf("tokenTableMayLag = %v, %q; want %v with a reason", got, why, tc.want)
			}
		})
	}
}
