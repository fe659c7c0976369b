package cluster_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/security"
	"github.com/coordd/coordd/testutil"
)

// raftTLSOf loads f as the raft port's TLS material, for probes.
func raftTLSOf(t *testing.T, f security.Files) *raftnode.RaftTLS {
	t.Helper()
	m, err := security.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return &raftnode.RaftTLS{Server: m.RaftServer(), Client: m.RaftClient()}
}

// TestSecureCluster runs three coordd processes and a streaming node the way
// `coordd dev --secure` does (TLS on every port, mutual TLS on raft, a
// bootstrap admin token, the streaming node authenticated by its node-1
// certificate) and checks, over real sockets:
//   - the bootstrap token works on every member; the streaming node registered,
//     bound to node identity 1;
//   - a plaintext client and a plaintext HTTP request are refused;
//   - on the raft port a client certificate from the cluster's own CA is
//     refused, a server certificate accepted;
//   - roles hold through a follower: a read token reads (forwarded) but cannot
//     drain; an admin token creates a token through a follower (forwarded);
//     a server certificate forwarding a read caller cannot act as admin;
//   - a revoked token stops working on every member; coordctl creates tokens,
//     a node token only with --node-id, and a streaming node started with
//     `--token-file` and that token registers bound to its node;
//   - the status page (read role) reaches every peer over TLS, and coordctl
//     debug bundle collects every member's status and metrics.
func TestSecureCluster(t *testing.T) {
	dir := t.TempDir()
	pki, boot, bootFile := ownDevPKI(t, dir)
	l := startClusterWith(t, cluster.LauncherConfig{StreamingNodes: 1,
		Security: &cluster.LaunchSecurity{Server: pki.Server, Nodes: pki.Nodes, BootstrapTokenFile: bootFile}})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(2*time.Minute))
	defer cancel()
	clientTLS, err := client.LoadTLS(client.TLSFiles{CA: pki.Client.CA})
	if err != nil {
		t.Fatal(err)
	}
	connect := func(token string, endpoints ...string) *client.Client {
		t.Helper()
		c, err := client.New(ctx, client.Config{Endpoints: endpoints, TLS: clientTLS, Token: token, RequestTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	code := func(err error) codes.Code { return status.Code(err) }

	// The first leader installs the bootstrap token; every member accepts it.
	admin := connect(boot.String(), strings.Split(l.Endpoints(), ",")...)
	var leaderID string
	testutil.EventuallyEvery(t, processWait, pollProcess, "the bootstrap token to work", func() bool {
		st, err := admin.Status(ctx)
		if err == nil {
			leaderID = st.GetLeaderId()
		}
		return err == nil && leaderID != ""
	})
	follower := l.Members()[0]
	if follower.ID == leaderID {
		follower = l.Members()[1]
	}
	testutil.EventuallyEvery(t, processWait, pollProcess, "the streaming node (node-1 certificate) to register, bound to node identity 1", func() bool {
		ns, err := admin.ListNodes(ctx, coordpb.ReadConsistency_STALE, true)
		return err == nil && len(ns) == 1 && ns[0].GetState() == "UP" && ns[0].GetBoundNode() == 1
	})

	// Plaintext is refused on the gRPC and HTTP ports.
	plain, err := client.New(ctx, client.Config{Endpoints: []string{follower.GRPCAddr}, MaxRetries: -1, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Status(ctx); err == nil {
		t.Fatal("a plaintext client got an answer from a TLS member")
	}
	if resp, err := http.Get("http://" + follower.HTTPAddr + "/v1/cluster/status"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plaintext HTTP: %d, want 400", resp.StatusCode)
		}
	}
	https := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	if resp, err := https.Get("https://" + follower.HTTPAddr + "/v1/cluster/status"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("HTTPS without a token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}

	// The raft port: the CVE-2021-37219 shape (a client certificate from the
	// same CA) is refused; a server certificate is accepted.
	raftTLS := func(f security.Files) *raftnode.RaftTLS { return raftTLSOf(t, f) }
	if who, err := raftnode.ProbeMember(follower.RaftAddr, 3*time.Second, raftTLS(pki.Node(1)).Client); err == nil {
		t.Fatalf("raft port answered a client certificate: %+v", who)
	}
	if who, err := raftnode.ProbeMember(follower.RaftAddr, 3*time.Second, nil); err == nil {
		t.Fatalf("raft port answered a plaintext probe: %+v", who)
	}
	if who, err := raftnode.ProbeMember(follower.RaftAddr, 3*time.Second, raftTLS(pki.Server).Client); err != nil || who.MemberID != follower.ID {
		t.Fatalf("raft port refused a server certificate: %+v %v", who, err)
	}

	// Roles through a follower.
	var created *coordpb.CreateTokenResponse
	err = whileNoLeader(t, func() (err error) {
		created, err = connect(boot.String(), follower.GRPCAddr).CreateToken(ctx, "read", "dashboard")
		return err
	})
	if err != nil {
		t.Fatalf("admin creates a token through a follower: %v", err)
	}
	reader := connect(created.GetSecret(), follower.GRPCAddr)
	testutil.EventuallyEvery(t, processWait, pollProcess, "the new read token to reach the follower", func() bool {
		_, err := reader.Members(ctx, coordpb.ReadConsistency_LINEARIZABLE) // forwarded to the leader
		return err == nil
	})
	if err := whileNoLeader(t, func() error { _, err := reader.DrainNode(ctx, 1, true, ""); return err }); code(err) != codes.PermissionDenied {
		t.Fatalf("read token drains a node: %v, want PermissionDenied", err)
	}
	// A server certificate vouching for a read caller gets read rights, not
	// its own admin rights, at the leader.
	serverTLS, err := security.Load(pki.Server)
	if err != nil {
		t.Fatal(err)
	}
	var leaderAddr string
	for _, m := range l.Members() {
		if m.ID == leaderID {
			leaderAddr = m.GRPCAddr
		}
	}
	conn, err := grpc.NewClient(leaderAddr, grpc.WithTransportCredentials(credentials.NewTLS(serverTLS.APIClient(""))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fwd := metadata.AppendToOutgoingContext(ctx, auth.MDCallerRole, "read")
	if err := whileNoLeader(t, func() error {
		_, err := coordpb.NewChannelsClient(conn).DrainNode(fwd, &coordpb.DrainNodeRequest{NodeId: 1})
		return err
	}); code(err) != codes.PermissionDenied {
		t.Fatalf("forwarded read caller drains a node: %v, want PermissionDenied", err)
	}

	// Revocation reaches every member.
	if err := admin.RevokeToken(ctx, created.GetToken().GetId()); err != nil {
		t.Fatal(err)
	}
	for _, m := range l.Members() {
		c := connect(created.GetSecret(), m.GRPCAddr)
		testutil.EventuallyEvery(t, processWait, pollProcess, "the revoked token to be refused by "+m.ID, func() bool {
			_, err := c.Status(ctx)
			return code(err) == codes.Unauthenticated
		})
	}

	// coordctl speaks TLS with a token file and prints a new secret once.
	out, err := exec.CommandContext(ctx, coordctlBinary, "--endpoints", l.Endpoints(), "--tls-ca", pki.Client.CA,
		"--token-file", bootFile, "token", "create", "node", "--node-id", "5", "--name", "sn5").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "cdt_") || !strings.Contains(string(out), "bound to node 5") {
		t.Fatalf("coordctl token create node --node-id 5: %v\n%s", err, out)
	}
	// A streaming node started with that token registers bound to node 5.
	secret := ""
	for _, line := range strings.Fields(string(out)) {
		if strings.HasPrefix(line, "cdt_") {
			secret = line
		}
	}
	tokenFile := filepath.Join(dir, "sn5.token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	snAddr := lis.Addr().String()
	lis.Close()
	snDir := filepath.Join(dir, "sn5")
	sn := exec.Command(streamingBinary, "--coord", l.Endpoints(), "--addr", snAddr, "--wal-dir", filepath.Join(snDir, "wal"),
		"--data-dir", snDir, "--tls-ca", pki.Client.CA, "--token-file", tokenFile,
		// Its own port needs a node certificate; it is not presented to
		// coordd, so the token alone binds the registration.
		"--listen-tls-cert", pki.Node(5).Cert, "--listen-tls-key", pki.Node(5).Key)
	var snLog strings.Builder
	sn.Stdout, sn.Stderr = &snLog, &snLog
	if err := sn.Start(); err != nil {
		t.Fatal(err)
	}
	snDone := make(chan error, 1)
	go func() { snDone <- sn.Wait() }()
	defer func() {
		_ = sn.Process.Signal(os.Interrupt)
		select {
		case <-snDone:
		case <-time.After(30 * time.Second):
			_ = sn.Process.Kill()
			<-snDone
		}
		if t.Failed() {
			t.Logf("--- log of the token-authenticated streaming node ---\n%s", tail(snLog.String(), evidenceTail))
		}
	}()
	testutil.EventuallyEvery(t, processWait, pollProcess, "the token-authenticated streaming node to register, bound to node identity 5", func() bool {
		ns, err := admin.ListNodes(ctx, coordpb.ReadConsistency_STALE, false)
		if err != nil {
			return false
		}
		for _, n := range ns {
			if n.GetAddress() == snAddr && n.GetState() == "UP" && n.GetBoundNode() == 5 {
				return true
			}
		}
		return false
	})

	// A node token without its node is refused by coordctl, with the fix.
	out, err = exec.CommandContext(ctx, coordctlBinary, "--endpoints", l.Endpoints(), "--tls-ca", pki.Client.CA,
		"--token-file", bootFile, "token", "create", "node", "--name", "unbound").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--node-id") {
		t.Fatalf("coordctl token create node without --node-id: %v\n%s", err, out)
	}

	// Members register their addresses in the background; the page and the
	// bundle below reach each member at the registered ones.
	testutil.EventuallyEvery(t, processWait, pollProcess, "every member to register its addresses", func() bool {
		ms, err := admin.Members(ctx, coordpb.ReadConsistency_STALE)
		n := 0
		for _, m := range ms {
			if m.GetGrpcAddr() != "" && m.GetHttpAddr() != "" {
				n++
			}
		}
		return err == nil && n == len(l.Members())
	})

	// The status page needs the read role and reads its peers' status over
	// TLS with the member's server certificate: no peer is unreachable.
	var viewerTok *coordpb.CreateTokenResponse
	err = whileNoLeader(t, func() (err error) {
		viewerTok, err = admin.CreateToken(ctx, "read", "browser")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	page := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+follower.HTTPAddr+"/ui?refresh=0", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := https.Do(req)
		if err != nil {
			t.Fatalf("GET /ui: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := page(""); code != http.StatusUnauthorized {
		t.Fatalf("/ui without a token: %d, want 401", code)
	}
	testutil.EventuallyEvery(t, processWait, pollProcess, "the status page to show every member reachable", func() bool {
		code, body := page(viewerTok.GetSecret())
		return code == http.StatusOK && !strings.Contains(body, "unreachable") && !strings.Contains(body, "could not read") &&
			strings.Contains(body, l.Members()[0].ID) && strings.Contains(body, l.Members()[2].ID)
	})

	// coordctl debug bundle with the admin token: every member answers
	// status, metrics (HTTPS with the token) and recent errors.
	bundle := filepath.Join(dir, "bundle.tar.gz")
	out, err = exec.CommandContext(ctx, coordctlBinary, "--endpoints", l.Endpoints(), "--tls-ca", pki.Client.CA,
		"--token-file", bootFile, "debug", "bundle", bundle).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "3 members, 3 answered") || strings.Contains(string(out), "not collected") {
		t.Fatalf("coordctl debug bundle: %v\n%s", err, out)
	}
}

// whileNoLeader calls call again while it answers Unavailable, the answer
// of a cluster that is electing (a loaded machine can take several terms
// to settle), up to the scaled processWait, and returns its last error.
// CreateToken is never resent by the SDK after an unknown outcome; a
// second token made by a repeat is harmless here.
func whileNoLeader(t *testing.T, call func() error) error {
	t.Helper()
	var err error
	testutil.EventuallyEvery(t, processWait, pollProcess, "an answer other than Unavailable", func() bool {
		err = call()
		return status.Code(err) != codes.Unavailable
	})
	return err
}
