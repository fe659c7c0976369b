package auth

import (
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/security"
)

func certWith(uris ...string) *x509.Certificate {
	c := &x509.Certificate{}
	for _, u := range uris {
		p, _ := url.Parse(u)
		c.URIs = append(c.URIs, p)
	}
	return c
}

func TestTokenRoundTrip(t *testing.T) {
	tok, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	s := tok.String()
	if len(s) != tokenLen || !strings.HasPrefix(s, "cdt_"+tok.ID+"_") {
		t.Fatalf("token %q", s)
	}
	for _, h := range []string{"Bearer " + s, "bearer " + s, "BEARER   " + s} {
		got, err := ParseAuthorization(h)
		if err != nil || got != tok || string(got.SecretHash()) != string(tok.SecretHash()) {
			t.Fatalf("ParseAuthorization(%q) = %v, %v", h, got, err)
		}
	}
	other, _ := NewToken()
	if other.ID == tok.ID || string(other.SecretHash()) == string(tok.SecretHash()) {
		t.Fatal("two fresh tokens collide")
	}
	for _, bad := range []string{"", "Bearer", "Bearer ", "Basic " + s, "Bearer" + s, "Bearer " + s + "x",
		"Bearer " + strings.ToUpper(s), "Bearer " + s[:len(s)-1] + "=", "Bearer cdt_0123456789abcdeg_" + s[21:]} {
		if _, err := ParseAuthorization(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseAuthorization(%q): %v, want ErrMalformed", bad, err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	admin, _ := NewToken()
	read, _ := NewToken()
	table := map[string]*logpb.TokenRecord{
		admin.ID: {Id: admin.ID, Name: "ops", Role: logpb.TokenRole_TOKEN_ROLE_ADMIN, SecretSha256: admin.SecretHash()},
		read.ID:  {Id: read.ID, Name: "dash", Role: logpb.TokenRole_TOKEN_ROLE_READ, SecretSha256: read.SecretHash()},
	}
	a := New(func(id string) (*logpb.TokenRecord, bool) { r, ok := table[id]; return r, ok })
	forged, _ := ParseToken("cdt_" + read.ID + "_" + strings.Repeat("A", 42) + "A")
	server := certWith(security.ServerURI)
	nodeCert := certWith(security.ClientURIPrefix+"sn1", security.RoleURIPrefix+"node")
	plainCert := certWith(security.ClientURIPrefix + "alice")
	for _, tc := range []struct {
		name string
		c    Credentials
		role Role
		err  error
	}{
		{"admin token", Credentials{Authorization: "Bearer " + admin.String()}, RoleAdmin, nil},
		{"read token", Credentials{Authorization: "Bearer " + read.String()}, RoleRead, nil},
		{"known id, wrong secret", Credentials{Authorization: "Bearer " + forged.String()}, RoleNone, ErrUnauthenticated},
		{"nothing", Credentials{}, RoleNone, ErrUnauthenticated},
		{"malformed", Credentials{Authorization: "Bearer x"}, RoleNone, ErrUnauthenticated},
		{"server certificate", Credentials{PeerCert: server}, RoleAdmin, nil},
		{"server forwarding a read caller", Credentials{PeerCert: server, CallerRole: "read"}, RoleRead, nil},
		{"server forwarding a bad role", Credentials{PeerCert: server, CallerRole: "root"}, RoleNone, ErrUnauthenticated},
		// A caller role from anyone but a server is ignored: it cannot elevate.
		{"read token claiming admin", Credentials{Authorization: "Bearer " + read.String(), CallerRole: "admin"}, RoleRead, nil},
		{"client cert claiming admin", Credentials{PeerCert: plainCert, CallerRole: "admin"}, RoleNone, ErrUnauthenticated},
		{"node certificate", Credentials{PeerCert: nodeCert}, RoleNode, nil},
		{"plain client certificate", Credentials{PeerCert: plainCert}, RoleNone, ErrUnauthenticated},
		{"token wins over certificate role", Credentials{PeerCert: nodeCert, Authorization: "Bearer " + read.String()}, RoleRead, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			who, err := a.Authenticate(tc.c)
			if !errors.Is(err, tc.err) || (err == nil && who.Role != tc.role) {
				t.Fatalf("Authenticate = %+v, %v; want role %s, error %v", who, err, tc.role, tc.err)
			}
		})
	}
	if err := Authorize(Identity{Role: RoleNode, Subject: "x"}, RoleAdmin); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("node calling admin: %v", err)
	}
	if err := Authorize(Identity{Role: RoleAdmin}, RoleRead); err != nil {
		t.Fatalf("admin calling read: %v", err)
	}
}

// FuzzParseAuthorization: the header parser never panics, and whatever it
// accepts is exactly a well-formed token that prints back to itself.
func FuzzParseAuthorization(f *testing.F) {
	tok, _ := NewToken()
	for _, s := range []string{"", "Bearer " + tok.String(), "bearer  " + tok.String(), "Basic abc", "Bearer cdt__", "Bearer \x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got, err := ParseAuthorization(h)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		again, err := ParseToken(got.String())
		if err != nil || again != got || !strings.HasSuffix(h, got.String()) || len(got.SecretHash()) != 32 {
			t.Fatalf("accepted %q as %q, which does not round-trip: %v", h, got, err)
		}
	})
}
