package raftnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/security"
)

// pkiParty writes a key pair issued by ca into a temp dir and loads it as
// raft TLS material; server=false loads it like any client certificate
// (security.LoadServer would refuse it, which is the point of the test).
func pkiParty(t *testing.T, ca *security.CA, kp security.KeyPair, trust []byte) *RaftTLS {
	t.Helper()
	dir := t.TempDir()
	caPath := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caPath, trust, 0o644); err != nil {
		t.Fatal(err)
	}
	cert, key, err := kp.Write(dir, "me")
	if err != nil {
		t.Fatal(err)
	}
	m, err := security.Load(security.Files{CA: caPath, Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return &RaftTLS{Server: m.RaftServer(), Client: m.RaftClient()}
}

// TestRaftTLSAdmitsOnlyServers: over mutual TLS, raft bytes flow between two
// holders of server certificates; a client certificate from the same CA (the
// Consul/Nomad CVE-2021-37219/37218 shape), a plaintext dialer, an expired
// server certificate and a certificate from another CA are all refused, and
// the refusing acceptor hands raft nothing.
func TestRaftTLSAdmitsOnlyServers(t *testing.T) {
	now := time.Now()
	ca, err := security.NewCA("test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other, err := security.NewCA("other CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *security.CA, server bool, from, to time.Time) security.KeyPair {
		var kp security.KeyPair
		var err error
		if server {
			kp, err = ca.IssueServer([]string{"127.0.0.1"}, from, to)
		} else {
			kp, err = ca.IssueClient("proxy", "admin", from, to)
		}
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	valid := func(ca *security.CA, server bool) security.KeyPair {
		return issue(ca, server, now.Add(-time.Hour), now.Add(time.Hour))
	}
	acceptorTLS := pkiParty(t, ca, valid(ca, true), ca.CertPEM)

	cases := []struct {
		name   string
		dialer *RaftTLS // nil: plaintext
		want   string   // "" = accepted; else part of the dial error
	}{
		{"server certificate", pkiParty(t, ca, valid(ca, true), ca.CertPEM), ""},
		{"client certificate from the same CA", pkiParty(t, ca, valid(ca, false), ca.CertPEM), "tls"},
		{"plaintext dialer", nil, ""},
		{"expired server certificate", pkiParty(t, ca, issue(ca, true, now.Add(-2*time.Hour), now.Add(-time.Hour)), ca.CertPEM), "tls"},
		{"server certificate from another CA", pkiParty(t, other, valid(other, true), other.CertPEM), "tls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := layerFor(t, "a", "c1"), layerFor(t, "b", "c1")
			a.tls, b.tls = tc.dialer, acceptorTLS
			got, err := exchange(t, a, b)
			switch {
			case tc.name == "server certificate":
				if err != nil || got != "raft!" {
					t.Fatalf("dial: %v, acceptor read %q; want the raft bytes through", err, got)
				}
			case tc.dialer == nil:
				// A plaintext hello is not a TLS ClientHello: the acceptor
				// drops the connection before raft sees anything; the
				// dialer's handshake answer never comes.
				if err == nil || got != "" {
					t.Fatalf("dial: %v, acceptor read %q; want refused", err, got)
				}
			default:
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), tc.want) || got != "" {
					t.Fatalf("dial: %v, acceptor read %q; want a TLS refusal", err, got)
				}
			}
		})
	}

	// The dialer checks the acceptor too: a raft port answered by a
	// client certificate (an impostor listening on a member's address) is
	// refused before any raft byte is sent.
	t.Run("impostor acceptor", func(t *testing.T) {
		a, b := layerFor(t, "a", "c1"), layerFor(t, "b", "c1")
		a.tls, b.tls = pkiParty(t, ca, valid(ca, true), ca.CertPEM), pkiParty(t, ca, valid(ca, false), ca.CertPEM)
		if got, err := exchange(t, a, b); err == nil || got != "" {
			t.Fatalf("dial: %v, read %q; want refused", err, got)
		}
	})

	t.Run("probe over TLS", func(t *testing.T) {
		b := layerFor(t, "b", "c1")
		b.tls = acceptorTLS
		go func() {
			if c, err := b.Accept(); err == nil {
				c.Read(make([]byte, 1))
				c.Close()
			}
		}()
		who, err := ProbeMember(b.ln.Addr().String(), 2*time.Second, pkiParty(t, ca, valid(ca, true), ca.CertPEM).Client)
		if err != nil || who.MemberID != "b" {
			t.Fatalf("probe: %+v, %v", who, err)
		}
	})
}
