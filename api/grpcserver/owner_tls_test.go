package grpcserver

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/security"
)

// tlsConn serves tn's Server on a TLS listener (the dev PKI's server
// certificate, client certificates verified against its CA, the server's
// own auth interceptors) and dials it as the party holding client (zero
// Cert for none).
func tlsConn(t *testing.T, tn *testNode, pki security.DevPKI, client security.Files) *grpc.ClientConn {
	t.Helper()
	srvMat, err := security.LoadServer(pki.Server)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(append(tn.srv.AuthInterceptors(), grpc.Creds(credentials.NewTLS(srvMat.APIServer())))...)
	tn.srv.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	cliMat, err := security.Load(client)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cliMat.APIClient(""))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestForgedOwnerCallsRefused is the regression test of the forged
// checkpoint (a proxy's credential, or another streaming node's, moving a
// VChannel's checkpoint past the WAL, after which the next owner skips
// acknowledged rows): over real TLS, with the dev PKI's per-node
// certificates and real tokens, every call that speaks for session 1
// (identity 1, holder of dv0) — UpdateChannelCheckpoints, SaveBinlogPaths,
// ReportTimeTicks, Ack, AssignSegmentID, Heartbeat — is PermissionDenied
// for a proxy token, a proxy certificate, node 2's certificate, node 2's
// token, an unbound (pre-identity) node token and the admin token, and
// changes nothing: no log entry, no checkpoint, no time tick, no heartbeat.
// Session 1's own certificate then moves its checkpoint.
func TestForgedOwnerCallsRefused(t *testing.T) {
	oc := startOwnedCluster(t, true)
	tn := oc.tn
	pki, err := security.WriteDevPKI(filepath.Join(t.TempDir(), "pki"), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caOnly := security.Files{CA: pki.Server.CA}
	ctx := callCtx(t)
	withToken := func(kind string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+oc.tokens[kind])
	}
	// The data path's forged position: far past the WAL's end.
	far := &coordpb.Position{Term: 2, Offset: 1 << 40, Timestamp: 1 << 62}
	forge := func(conn *grpc.ClientConn, c context.Context) map[string]error {
		dc := coordpb.NewDataCoordClient(conn)
		out := map[string]error{}
		_, out["UpdateChannelCheckpoints"] = dc.UpdateChannelCheckpoints(c, &coordpb.UpdateChannelCheckpointsRequest{NodeId: 1,
			Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: dv0, PchannelTerm: 2, Position: far}}})
		_, out["SaveBinlogPaths"] = dc.SaveBinlogPaths(c, &coordpb.SaveBinlogPathsRequest{NodeId: 1, Vchannel: dv0, PchannelTerm: 2,
			SegmentId: 1, CollectionId: dataColl, PartitionId: 1, Flushed: true,
			Checkpoints: []*coordpb.SegmentCheckpoint{{SegmentId: 1, Position: far, NumOfRows: 1}}})
		_, out["ReportTimeTicks"] = dc.ReportTimeTicks(c, &coordpb.ReportTimeTicksRequest{NodeId: 1,
			Ticks: []*coordpb.ChannelTimeTick{{Vchannel: dv0, PchannelTerm: 2, TimeTick: 1 << 62}}})
		_, out["AssignSegmentID"] = dc.AssignSegmentID(c, &coordpb.AssignSegmentIDRequest{NodeId: 1, Requests: []*coordpb.SegmentIDRequest{
			{CollectionId: dataColl, PartitionId: 1, Vchannel: dv0, PchannelTerm: 2, Rows: 1, Bytes: 10}}})
		_, out["Ack"] = coordpb.NewBroadcasterClient(conn).Ack(c, &coordpb.AckRequest{BroadcastId: 1, NodeId: 1, Epoch: oc.epoch1,
			Checkpoints: []*coordpb.Checkpoint{{Vchannel: dv0, Term: 2, Offset: 1 << 40, TimeTick: 1 << 62}}})
		_, out["Heartbeat"] = coordpb.NewStreamingNodeRegistryClient(conn).Heartbeat(c, &coordpb.HeartbeatRequest{NodeId: 1, Epoch: oc.epoch1})
		return out
	}
	before := tn.node.State().AppliedIndex()
	for _, who := range []struct {
		name   string
		client security.Files
		ctx    context.Context
	}{
		{"proxy token", caOnly, withToken("proxy")},
		{"unbound node token", caOnly, withToken("legacy")},
		{"node 2's token", caOnly, withToken("other")},
		{"admin token", caOnly, withToken("admin")},
		{"proxy certificate", pki.Proxy, ctx},
		{"node 2's certificate", pki.Node(2), ctx},
	} {
		conn := tlsConn(t, tn, pki, who.client)
		for call, err := range forge(conn, who.ctx) {
			if status.Code(err) != codes.PermissionDenied {
				t.Errorf("%s forging %s for session 1: %v, want PermissionDenied", who.name, call, err)
			}
		}
	}
	st := tn.node.State()
	if st.AppliedIndex() != before {
		t.Errorf("forged calls moved the applied index from %d to %d", before, st.AppliedIndex())
	}
	if cp, ok := st.ChannelCheckpoint(dv0); ok {
		t.Errorf("a forged checkpoint was stored: %+v", cp)
	}
	if tick, ok := tn.set.Data.TimeTicks()[dv0]; ok {
		t.Errorf("a forged time tick was recorded: %d", tick)
	}
	if _, seen := oc.beats.LastSeen(1); seen {
		t.Error("a forged heartbeat was recorded")
	}

	// The owner's own certificate is accepted, and moves the checkpoint.
	owner := tlsConn(t, tn, pki, pki.Node(1))
	resp, err := coordpb.NewDataCoordClient(owner).UpdateChannelCheckpoints(ctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: 1,
		Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: dv0, PchannelTerm: 2, Position: &coordpb.Position{Term: 2, Offset: 1, Timestamp: 100}}}})
	if err != nil || resp.Accepted != 1 {
		t.Fatalf("owner's checkpoint: %v %v", resp, err)
	}
	if cp, ok := tn.node.State().ChannelCheckpoint(dv0); !ok || cp.Position.Offset != 1 {
		t.Fatalf("owner's checkpoint not stored: %+v %v", cp, ok)
	}
	// The owner's ack goes through the broadcaster's proposal, stamped with
	// its identity (an unknown broadcast: a no-op, but past Apply's check).
	if _, err := coordpb.NewBroadcasterClient(owner).Ack(ctx, &coordpb.AckRequest{BroadcastId: 99, NodeId: 1, Epoch: oc.epoch1,
		Checkpoints: []*coordpb.Checkpoint{{Vchannel: dv0, Term: 2, Offset: 1, TimeTick: 100}}}); err != nil {
		t.Fatalf("owner's ack: %v", err)
	}
	// Session 2's own data path is not session 1's: node 1 may not speak
	// for it either.
	_, err = coordpb.NewDataCoordClient(owner).ReportTimeTicks(ctx, &coordpb.ReportTimeTicksRequest{NodeId: 2,
		Ticks: []*coordpb.ChannelTimeTick{{Vchannel: dv1, PchannelTerm: 2, TimeTick: 100}}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node 1 reporting for session 2: %v, want PermissionDenied", err)
	}
}
