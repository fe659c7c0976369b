package cluster_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/security"
	"github.com/coordd/coordd/testutil"
)

// TestSecureStreamingNodePort: on a secure cluster the streaming node's
// port is TLS with the node's certificate and admits coordd's calls only
// from coordd. The forged Remove of the hostile probe (every value public:
// ListPChannels and the node's Status) is refused whoever sends it: over
// plaintext (no TLS handshake), over TLS without a client certificate and
// with the node-role certificate (PermissionDenied: not the server
// identity), and even with coordd's server certificate (Unavailable: coordd
// removes a term only after assigning a newer one). After all of them the
// WAL is still open at its term, the channel is still ASSIGNED there, and
// an append through the owner works. Read-only Status is open to any TLS
// client. On a coordd without these checks the plaintext Remove closes the
// WAL while coordd keeps the channel ASSIGNED. Writes (Insert, Append)
// need a writer's client certificate: none, one without a role or another
// node's is refused (Unauthenticated, PermissionDenied), the proxy
// certificate is admitted, and a client holding only a token is refused
// at once.
func TestSecureStreamingNodePort(t *testing.T) {
	dir := t.TempDir()
	pki, boot, bootFile := ownDevPKI(t, dir)
	l := startClusterWith(t, cluster.LauncherConfig{StreamingNodes: 1, ExtraArgs: []string{"--pchannels", "4"},
		Security: &cluster.LaunchSecurity{Server: pki.Server, Nodes: pki.Nodes, BootstrapTokenFile: bootFile}})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(90*time.Second))
	defer cancel()
	clientTLS, err := client.LoadTLS(client.TLSFiles{CA: pki.Client.CA})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(ctx, client.Config{Endpoints: strings.Split(l.Endpoints(), ","), TLS: clientTLS, Token: boot.String(),
		RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const victim = "by-dev-rootcoord-dml_0"
	var term int64
	testutil.EventuallyEvery(t, 45*time.Second, 100*time.Millisecond, victim+" ASSIGNED over the node's TLS port", func() bool {
		resp, err := admin.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
		if err != nil {
			return false
		}
		for _, p := range resp.Pchannels {
			if p.Name == victim && p.State == "ASSIGNED" {
				term = p.Term
				return true
			}
		}
		return false
	})

	addr := l.StreamingNodes()[0].Addr
	dial := func(creds credentials.TransportCredentials) coordpb.StreamingNodeServiceClient {
		t.Helper()
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return coordpb.NewStreamingNodeServiceClient(conn)
	}
	withCert := func(f security.Files) credentials.TransportCredentials {
		t.Helper()
		tc, err := client.LoadTLS(client.TLSFiles{CA: f.CA, Cert: f.Cert, Key: f.Key})
		if err != nil {
			t.Fatal(err)
		}
		return credentials.NewTLS(security.StreamingNodeClient(tc))
	}
	anon := dial(credentials.NewTLS(security.StreamingNodeClient(clientTLS)))
	// Status is open to any TLS client; it names the session and the
	// coordinator term a forger needs.
	st, err := anon.Status(ctx, &coordpb.NodeStatusRequest{})
	if err != nil {
		t.Fatalf("Status over TLS without a client certificate: %v", err)
	}
	holds := func() bool {
		t.Helper()
		now, err := anon.Status(ctx, &coordpb.NodeStatusRequest{})
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		for _, w := range now.Wals {
			if w.Pchannel == victim && w.Term == term {
				return true
			}
		}
		return false
	}
	if !holds() {
		t.Fatalf("the node does not hold %s at term %d: %v", victim, term, st)
	}
	forged := &coordpb.RemoveRequest{Pchannel: victim, Term: term, CoordTerm: st.MaxCoordTerm, NodeId: st.NodeId, Epoch: st.Epoch}

	// Plaintext: no handshake.
	if _, err := dial(insecure.NewCredentials()).Remove(ctx, forged); err == nil {
		t.Fatal("a plaintext Remove was answered by a secure streaming node")
	}
	// TLS, but not coordd: PermissionDenied.
	for name, cl := range map[string]coordpb.StreamingNodeServiceClient{
		"no client certificate": anon,
		"the node certificate":  dial(withCert(pki.Node(1))),
		"a client certificate":  dial(withCert(pki.Client)),
	} {
		_, err := cl.Remove(ctx, forged)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), security.ServerURI) {
			t.Fatalf("Remove with %s: %v, want PermissionDenied naming %s", name, err, security.ServerURI)
		}
		_, err = cl.Assign(ctx, &coordpb.AssignRequest{Pchannel: victim, Term: term + 1, CoordTerm: st.MaxCoordTerm,
			NodeId: st.NodeId, Epoch: st.Epoch})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Assign with %s: %v, want PermissionDenied", name, err)
		}
	}
	// coordd's own certificate, but a Remove coordd never decided.
	if _, err := dial(withCert(pki.Server)).Remove(ctx, forged); status.Code(err) != codes.Unavailable ||
		!strings.Contains(err.Error(), "coordd removes a term only after assigning a newer one") {
		t.Fatalf("an undecided Remove with the server certificate: %v, want Unavailable", err)
	}
	if !holds() {
		t.Fatalf("the WAL of %s at term %d was closed by a refused Remove", victim, term)
	}
	resp, err := admin.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Pchannels {
		if p.Name == victim && (p.State != "ASSIGNED" || p.Term != term) {
			t.Fatalf("%s moved to %s at term %d after refused Removes", victim, p.State, p.Term)
		}
	}
	// The data path writes only for a writer's certificate: no
	// certificate or one without a role is Unauthenticated, another
	// node's certificate PermissionDenied (the node's is identity 1),
	// the proxy certificate works — the data path still works through the
	// owner after the refused Removes.
	proxy := dial(withCert(pki.Proxy))
	appendReq := &coordpb.AppendRequest{Vchannel: victim + "_77v0", Term: term, Payload: []byte("still-here"),
		NodeId: st.NodeId, Epoch: st.Epoch}
	insertReq := &coordpb.InsertRequest{Vchannel: victim + "_77v0", CollectionId: 77, Pks: []int64{1}, Term: term,
		NodeId: st.NodeId, Epoch: st.Epoch}
	for _, tc := range []struct {
		name string
		cl   coordpb.StreamingNodeServiceClient
		want codes.Code
	}{
		{"no client certificate", anon, codes.Unauthenticated},
		{"a client certificate without a role", dial(withCert(pki.Client)), codes.Unauthenticated},
		{"another node's certificate", dial(withCert(pki.Node(2))), codes.PermissionDenied},
	} {
		if _, err := tc.cl.Append(ctx, appendReq); status.Code(err) != tc.want {
			t.Fatalf("Append with %s: %v, want %v", tc.name, err, tc.want)
		}
		if _, err := tc.cl.Insert(ctx, insertReq); status.Code(err) != tc.want {
			t.Fatalf("Insert with %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := proxy.Append(ctx, appendReq); err != nil {
		t.Fatalf("append through the owner with the proxy certificate, after the refused Removes: %v", err)
	}
	// Reading the WAL needs a certificate of the cluster too (any role or
	// node): anonymously or role-less it is Unauthenticated; another
	// node's certificate reads the row just appended.
	readFirst := func(cl coordpb.StreamingNodeServiceClient) (*coordpb.WALMessage, error) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		stream, err := cl.Read(rctx, &coordpb.ReadRequest{Vchannel: victim + "_77v0"})
		if err != nil {
			return nil, err
		}
		return stream.Recv()
	}
	for name, cl := range map[string]coordpb.StreamingNodeServiceClient{
		"no client certificate": anon, "a client certificate without a role": dial(withCert(pki.Client))} {
		if _, err := readFirst(cl); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("Read with %s: %v, want Unauthenticated", name, err)
		}
	}
	if m, err := readFirst(dial(withCert(pki.Node(2)))); err != nil || string(m.GetPayload()) != "still-here" {
		t.Fatalf("Read with another node's certificate: %v, %v; want the appended row", m, err)
	}
	// Insert through the client: with the proxy certificate the rows are
	// admitted; the admin token alone (no certificate) is refused at once.
	proxyTLS, err := client.LoadTLS(client.TLSFiles{CA: pki.Proxy.CA, Cert: pki.Proxy.Cert, Key: pki.Proxy.Key})
	if err != nil {
		t.Fatal(err)
	}
	writer, err := client.New(ctx, client.Config{Endpoints: strings.Split(l.Endpoints(), ","), TLS: proxyTLS, Token: boot.String(),
		RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if _, err := writer.AllocVirtualChannels(ctx, 78, 1, ""); err != nil {
		t.Fatal(err)
	}
	if res, err := writer.Insert(ctx, 78, 0, 10, 0); err != nil {
		t.Fatalf("insert with the proxy certificate: %v", err)
	} else if res.Count != 10 {
		t.Fatalf("insert with the proxy certificate wrote %d rows, want 10", res.Count)
	}
	start := time.Now()
	if _, err := admin.Insert(ctx, 78, 0, 10, 0); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "proxy") {
		t.Fatalf("insert with the admin token and no certificate: %v, want Unauthenticated naming the proxy role", err)
	} else if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refused insert took %v to fail", d)
	}
	// A coordinator append (coord_term set) is coordd's call too.
	if _, err := anon.Append(ctx, &coordpb.AppendRequest{Vchannel: victim + "_77v0", Term: term, Payload: []byte("x"), BroadcastId: 9,
		CoordTerm: st.MaxCoordTerm, NodeId: st.NodeId, Epoch: st.Epoch}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a coordinator append without the server identity: %v, want PermissionDenied", err)
	}
	// So is a batch of them, even from a writer's (the proxy's) certificate.
	batch := &coordpb.AppendBatchRequest{Items: []*coordpb.AppendRequest{{Vchannel: victim + "_77v0", Term: term, Payload: []byte("x"),
		BroadcastId: 9, CoordTerm: st.MaxCoordTerm, NodeId: st.NodeId, Epoch: st.Epoch}}}
	for name, cl := range map[string]coordpb.StreamingNodeServiceClient{"no client certificate": anon, "the proxy certificate": proxy} {
		if _, err := cl.AppendBatch(ctx, batch); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("AppendBatch with %s: %v, want PermissionDenied", name, err)
		}
	}
	// A node certificate is verified as a streaming node's, not as a
	// server name: a client that insists on coordd's name refuses it.
	strict := clientTLS.Clone()
	conn, err := tls.Dial("tcp", addr, strict)
	if err == nil {
		conn.Close()
		t.Fatal("a TLS client verifying the coordd server name accepted the streaming node's certificate")
	}
}
