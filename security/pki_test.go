package security

import (
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"testing"
	"time"
)

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestIssueNode: a node certificate names exactly its node identity, never
// the server identity, and is for client authentication only.
func TestIssueNode(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.IssueNode(42, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c := parseCert(t, kp.CertPEM)
	if id, err := CertNode(c); err != nil || id != 42 {
		t.Fatalf("CertNode = %d, %v; want 42", id, err)
	}
	if r, err := CertRole(c); IsServerCert(c) || r != "" || err != nil {
		t.Fatalf("node certificate carries the server identity or a role URI: %v", c.URIs)
	}
	if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Fatalf("EKU %v, want clientAuth only", c.ExtKeyUsage)
	}
	if _, err := ca.IssueNode(0, now, now.Add(time.Hour)); err == nil {
		t.Fatal("issued a certificate for node identity 0")
	}
	cli, err := ca.IssueClient("proxy", "proxy", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := CertNode(parseCert(t, cli.CertPEM)); err != nil || id != 0 {
		t.Fatalf("a proxy certificate names node %d (%v)", id, err)
	}
}

// TestWriteDevPKI: the dev PKI holds one certificate per streaming node
// identity 1..DevNodes, each bound to its own identity, and a proxy one.
func TestWriteDevPKI(t *testing.T) {
	p, err := WriteDevPKI(t.TempDir(), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != DevNodes {
		t.Fatalf("%d node certificates, want %d", len(p.Nodes), DevNodes)
	}
	for i := 1; i <= DevNodes; i++ {
		data, err := os.ReadFile(p.Node(i).Cert)
		if err != nil {
			t.Fatal(err)
		}
		if id, err := CertNode(parseCert(t, data)); err != nil || id != uint64(i) {
			t.Fatalf("%s names node %d (%v), want %d", p.Node(i).Cert, id, err, i)
		}
		if _, err := os.Stat(p.Node(i).Key); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(p.Proxy.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := CertRole(parseCert(t, data)); r != "proxy" || err != nil {
		t.Fatalf("proxy certificate role %q, %v", r, err)
	}
}

// FuzzCertNode: the node URI parser never panics; what it accepts is
// exactly one canonical positive node identity, which prints back to the
// same URI.
func FuzzCertNode(f *testing.F) {
	for _, s := range []string{"1", "42", "0", "07", "-1", "18446744073709551615", "18446744073709551616", "1/2", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tail string) {
		u, err := url.Parse(NodeURIPrefix + tail)
		if err != nil {
			return
		}
		id, err := CertNode(&x509.Certificate{URIs: []*url.URL{u}})
		if err != nil {
			return
		}
		if id == 0 || NodeURI(id) != u.String() {
			t.Fatalf("accepted %q as node %d", u, id)
		}
	})
}
