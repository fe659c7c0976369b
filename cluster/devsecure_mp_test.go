package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/security"
	"github.com/coordd/coordd/testutil"
)

// TestDevSecure: `coordd dev --secure` (what `make run-secure` runs) brings
// up three members and a streaming node with TLS on every port, mutual TLS
// on raft and tokens: the CA, certificates and the admin token it writes
// under <data-dir>/pki work with coordctl as its banner says; a call without
// a token is Unauthenticated; plaintext HTTP is refused; on the raft port a
// plaintext probe and a client certificate from the same CA are refused and
// the server certificate is accepted; the streaming node registered over
// TLS with its node-role certificate; and the write path works: the
// banner's coordctl inserts 5000 rows and `flush --wait` finishes (the
// streaming node's data-path client talks TLS with the node's credential).
func TestDevSecure(t *testing.T) {
	dir := t.TempDir()
	base := freeBasePort(t, 3)
	banner := startDev(t, dir, base, "--secure", "--nodes", "3", "--streaming-nodes", "1")
	pkiDir := filepath.Join(dir, "pki")
	if !strings.Contains(banner, "secure:") || !strings.Contains(banner, pkiDir) {
		t.Fatalf("banner does not say the cluster is secure with its PKI in %s:\n%s", pkiDir, banner)
	}
	pki := security.DevPKIIn(pkiDir)
	token := filepath.Join(pkiDir, "admin.token")
	for _, f := range []string{pki.Server.CA, pki.Server.Cert, pki.Server.Key, pki.Node(1).Cert, pki.Node(1).Key, token} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("coordd dev --secure did not write %s: %v", f, err)
		}
	}
	endpoints := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", base, base+1, base+2)

	// The banner's coordctl line, with the admin token: three voters.
	var out string
	testutil.EventuallyEvery(t, 30*time.Second, 200*time.Millisecond, "coordctl with the dev CA and admin token to list three voters", func() bool {
		var code int
		code, out = runTool(t, coordctlBinary, "--endpoints", endpoints, "--tls-ca", pki.Server.CA, "--token-file", token, "cluster", "members")
		return code == 0 && strings.Count(out, "voter") == 3
	})
	if code, out := runTool(t, coordctlBinary, "--endpoints", endpoints, "--tls-ca", pki.Server.CA, "cluster", "members"); code == 0 ||
		!strings.Contains(out, "unauthenticated") {
		t.Fatalf("coordctl without a token: exit %d: %s", code, out)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/cluster/status", base+1000)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plaintext HTTP: %d, want 400", resp.StatusCode)
		}
	}

	// The raft port admits only the server identity.
	raftAddr := fmt.Sprintf("127.0.0.1:%d", base+100)
	if who, err := raftnode.ProbeMember(raftAddr, 3*time.Second, nil); err == nil {
		t.Fatalf("raft port answered a plaintext probe: %+v", who)
	}
	if who, err := raftnode.ProbeMember(raftAddr, 3*time.Second, raftTLSOf(t, pki.Node(1)).Client); err == nil {
		t.Fatalf("raft port answered a client certificate from the same CA: %+v", who)
	}
	if who, err := raftnode.ProbeMember(raftAddr, 3*time.Second, raftTLSOf(t, pki.Server).Client); err != nil || who.MemberID != "n1" {
		t.Fatalf("raft port refused the server certificate: %+v %v", who, err)
	}

	// The streaming node registered with its node-role certificate.
	tlsCfg, err := client.LoadTLS(client.TLSFiles{CA: pki.Server.CA})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(60*time.Second))
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: strings.Split(endpoints, ","), TLS: tlsCfg,
		Token: strings.TrimSpace(string(secret)), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, "the streaming node to register over TLS", func() bool {
		ns, err := c.ListNodes(ctx, coordpb.ReadConsistency_STALE, true)
		return err == nil && len(ns) == 1 && ns[0].GetState() == "UP"
	})

	// The write path, with the banner's coordctl flags: insert reaches the
	// streaming node, whose data-path client asks coordd for segments, and
	// the flusher reports binlogs so that flush --wait finishes.
	sec := []string{"--endpoints", endpoints, "--tls-ca", pki.Server.CA, "--tls-cert", pki.Proxy.Cert, "--tls-key", pki.Proxy.Key, "--token-file", token}
	if !strings.Contains(banner, strings.Join(sec[2:], " ")) {
		t.Fatalf("the banner's coordctl line is not %q:\n%s", strings.Join(sec[2:], " "), banner)
	}
	testutil.EventuallyEvery(t, 30*time.Second, 200*time.Millisecond, "every pchannel to be ASSIGNED", func() bool {
		resp, err := c.ListPChannels(ctx, coordpb.ReadConsistency_STALE)
		if err != nil || len(resp.GetPchannels()) == 0 {
			return false
		}
		for _, p := range resp.Pchannels {
			if p.GetState() != "ASSIGNED" {
				return false
			}
		}
		return true
	})
	if code, out := runTool(t, coordctlBinary, append(sec, "vchannel", "alloc", "100", "2")...); code != 0 {
		t.Fatalf("vchannel alloc: exit %d: %s", code, out)
	}
	if code, out := runTool(t, coordctlBinary, append(sec, "insert", "100", "5000")...); code != 0 {
		t.Fatalf("insert 100 5000 on a secure dev cluster: exit %d: %s", code, out)
	}
	if code, out := runTool(t, coordctlBinary, append(sec, "flush", "100", "--wait", "--wait-timeout", "45s")...); code != 0 {
		t.Fatalf("flush 100 --wait on a secure dev cluster: exit %d: %s", code, out)
	}
	// Without the proxy certificate the streaming node refuses the rows
	// (it takes no tokens), at once and saying why.
	if code, out := runTool(t, coordctlBinary, "--endpoints", endpoints, "--tls-ca", pki.Server.CA, "--token-file", token,
		"vchannel", "alloc", "101", "1"); code != 0 {
		t.Fatalf("vchannel alloc: exit %d: %s", code, out)
	}
	if code, out := runTool(t, coordctlBinary, "--endpoints", endpoints, "--tls-ca", pki.Server.CA, "--token-file", token,
		"insert", "101", "10"); code == 0 || !strings.Contains(out, "needs a client certificate") || !strings.Contains(out, "proxy") {
		t.Fatalf("insert with a token but no proxy certificate: exit %d: %s", code, out)
	}
}
