package auth

import (
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/security"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	proxy, _ := NewToken()
	node3, _ := NewToken()
	legacy, _ := NewToken()
	table := map[string]*logpb.TokenRecord{
		admin.ID:  {Id: admin.ID, Name: "ops", Role: logpb.TokenRole_TOKEN_ROLE_ADMIN, SecretSha256: admin.SecretHash()},
		read.ID:   {Id: read.ID, Name: "dash", Role: logpb.TokenRole_TOKEN_ROLE_READ, SecretSha256: read.SecretHash()},
		proxy.ID:  {Id: proxy.ID, Name: "proxy-1", Role: logpb.TokenRole_TOKEN_ROLE_PROXY, SecretSha256: proxy.SecretHash()},
		node3.ID:  {Id: node3.ID, Name: "sn3", Role: logpb.TokenRole_TOKEN_ROLE_NODE, NodeId: 3, SecretSha256: node3.SecretHash()},
		legacy.ID: {Id: legacy.ID, Name: "old", Role: logpb.TokenRole_TOKEN_ROLE_NODE, SecretSha256: legacy.SecretHash()},
	}
	a := New(func(id string) (*logpb.TokenRecord, bool) { r, ok := table[id]; return r, ok })
	forged, _ := ParseToken("cdt_" + read.ID + "_" + strings.Repeat("A", 42) + "A")
	server := certWith(security.ServerURI)
	nodeCert := certWith(security.ClientURIPrefix+"sn1", security.RoleURIPrefix+"node")
	node7Cert := certWith(security.ClientURIPrefix+"sn7", security.NodeURI(7))
	plainCert := certWith(security.ClientURIPrefix + "alice")
	for _, tc := range []struct {
		name string
		c    Credentials
		role Role
		err  error
		node uint64
	}{
		{"proxy token", Credentials{Authorization: "Bearer " + proxy.String()}, RoleProxy, nil, 0},
		{"node token", Credentials{Authorization: "Bearer " + node3.String()}, RoleNode, nil, 3},
		// Node tokens from before per-node identity keep proxy rights only.
		{"unbound node token", Credentials{Authorization: "Bearer " + legacy.String()}, RoleProxy, nil, 0},
		{"node certificate bound to 7", Credentials{PeerCert: node7Cert}, RoleNode, nil, 7},
		{"node certificate with its role URI", Credentials{PeerCert: certWith(security.NodeURI(7), security.RoleURIPrefix+"node")}, RoleNode, nil, 7},
		{"node certificate claiming admin too", Credentials{PeerCert: certWith(security.NodeURI(7), security.RoleURIPrefix+"admin")}, RoleNone, ErrUnauthenticated, 0},
		{"certificate naming two nodes", Credentials{PeerCert: certWith(security.NodeURI(7), security.NodeURI(8))}, RoleNone, ErrUnauthenticated, 0},
		{"certificate naming roles read and admin", Credentials{PeerCert: certWith(security.RoleURIPrefix+"read", security.RoleURIPrefix+"admin")},
			RoleNone, ErrUnauthenticated, 0},
		{"certificate naming roles admin and read", Credentials{PeerCert: certWith(security.RoleURIPrefix+"admin", security.RoleURIPrefix+"read")},
			RoleNone, ErrUnauthenticated, 0},
		{"certificate naming node 0", Credentials{PeerCert: certWith(security.NodeURIPrefix + "0")}, RoleNone, ErrUnauthenticated, 0},
		{"certificate naming node 07", Credentials{PeerCert: certWith(security.NodeURIPrefix + "07")}, RoleNone, ErrUnauthenticated, 0},
		{"server forwarding node 3", Credentials{PeerCert: server, CallerRole: "node", CallerNode: "3"}, RoleNode, nil, 3},
		{"server forwarding a node without its identity", Credentials{PeerCert: server, CallerRole: "node"}, RoleNone, ErrUnauthenticated, 0},
		{"server forwarding a proxy that names a node", Credentials{PeerCert: server, CallerRole: "proxy", CallerNode: "3"}, RoleNone, ErrUnauthenticated, 0},
		// Forwarding metadata from anyone but a server is ignored: a proxy
		// cannot claim a node, a node cannot claim another one.
		{"proxy token claiming node 3", Credentials{Authorization: "Bearer " + proxy.String(), CallerRole: "node", CallerNode: "3"}, RoleProxy, nil, 0},
		{"node token claiming node 4", Credentials{Authorization: "Bearer " + node3.String(), CallerRole: "node", CallerNode: "4"}, RoleNode, nil, 3},
		{"node certificate claiming node 4", Credentials{PeerCert: node7Cert, CallerRole: "node", CallerNode: "4"}, RoleNode, nil, 7},
		{"admin token", Credentials{Authorization: "Bearer " + admin.String()}, RoleAdmin, nil, 0},
		{"read token", Credentials{Authorization: "Bearer " + read.String()}, RoleRead, nil, 0},
		{"known id, wrong secret", Credentials{Authorization: "Bearer " + forged.String()}, RoleNone, ErrUnauthenticated, 0},
		{"nothing", Credentials{}, RoleNone, ErrUnauthenticated, 0},
		{"malformed", Credentials{Authorization: "Bearer x"}, RoleNone, ErrUnauthenticated, 0},
		{"server certificate", Credentials{PeerCert: server}, RoleAdmin, nil, 0},
		{"server forwarding a read caller", Credentials{PeerCert: server, CallerRole: "read"}, RoleRead, nil, 0},
		{"server forwarding a bad role", Credentials{PeerCert: server, CallerRole: "root"}, RoleNone, ErrUnauthenticated, 0},
		// A caller role from anyone but a server is ignored: it cannot elevate.
		{"read token claiming admin", Credentials{Authorization: "Bearer " + read.String(), CallerRole: "admin"}, RoleRead, nil, 0},
		{"client cert claiming admin", Credentials{PeerCert: plainCert, CallerRole: "admin"}, RoleNone, ErrUnauthenticated, 0},
		{"legacy node-role certificate", Credentials{PeerCert: nodeCert}, RoleProxy, nil, 0},
		{"plain client certificate", Credentials{PeerCert: plainCert}, RoleNone, ErrUnauthenticated, 0},
		{"token wins over certificate role", Credentials{PeerCert: nodeCert, Authorization: "Bearer " + read.String()}, RoleRead, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			who, err := a.Authenticate(tc.c)
			if !errors.Is(err, tc.err) || (err == nil && (who.Role != tc.role || who.Node != tc.node)) {
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

// TestIncludes pins the role lattice by hand: read < proxy < admin, proxy <
// node, and node methods need a node credential, which admin is not.
func TestIncludes(t *testing.T) {
	want := map[Role]string{ // the needs each role meets, by initial
		RoleNone:  "-",
		RoleRead:  "-r",
		RoleProxy: "-rp",
		RoleNode:  "-rpn",
		RoleAdmin: "-rpa",
	}
	initial := map[Role]string{RoleNone: "-", RoleRead: "r", RoleProxy: "p", RoleNode: "n", RoleAdmin: "a"}
	for have, meets := range want {
		got := ""
		for need := RoleNone; need <= RoleAdmin; need++ {
			if have.Includes(need) {
				got += initial[need]
			}
		}
		if got != meets {
			t.Errorf("%s meets %q, want %q", have, got, meets)
		}
	}
	if err := Authorize(Identity{Role: RoleNode, Subject: "x"}, RoleNode); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("a node identity without a node ID: %v, want PermissionDenied", err)
	}
	if err := SpeaksFor(Identity{Role: RoleNode, Node: 3}, 11, 3); err != nil {
		t.Errorf("node 3 speaking for its session: %v", err)
	}
	for _, who := range []Identity{{Role: RoleNode, Node: 4}, {Role: RoleAdmin}, {Role: RoleProxy}, {Role: RoleNode}} {
		if err := SpeaksFor(who, 11, 3); !errors.Is(err, ErrPermissionDenied) {
			t.Errorf("%+v speaking for node 3's session: %v, want PermissionDenied", who, err)
		}
	}
	if err := SpeaksFor(Identity{Role: RoleNode, Node: 3}, 11, 0); !errors.Is(err, ErrPermissionDenied) {
		t.Errorf("speaking for an unbound session: %v, want PermissionDenied", err)
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

// A member that may not have applied a token yet answers an unknown token
// with ErrNotCaughtUp (Unavailable: retry elsewhere), never Unauthenticated;
// a current member, or a wrong secret for a known token, is Unauthenticated.
func TestUnknownTokenOnALaggingMember(t *testing.T) {
	known, _ := NewToken()
	unknown, _ := NewToken()
	table := map[string]*logpb.TokenRecord{known.ID: {Id: known.ID, Name: "ops", Role: logpb.TokenRole_TOKEN_ROLE_ADMIN, SecretSha256: known.SecretHash()}}
	behind := true
	a := New(func(id string) (*logpb.TokenRecord, bool) { r, ok := table[id]; return r, ok }).
		WithCatchUp(func() (bool, string) { return behind, "is replaying its log" })
	bearer := func(tok Token) Credentials { return Credentials{Authorization: "Bearer " + tok.String()} }
	forged, _ := ParseToken("cdt_" + known.ID + "_" + strings.Repeat("A", 43))

	if _, err := a.Authenticate(bearer(unknown)); !errors.Is(err, ErrNotCaughtUp) || status.Code(StatusOf(err)) != codes.Unavailable {
		t.Fatalf("unknown token while behind: %v", err)
	}
	if id, err := a.Authenticate(bearer(known)); err != nil || id.Role != RoleAdmin {
		t.Fatalf("known token while behind: %v %v", id, err)
	}
	if _, err := a.Authenticate(bearer(forged)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("known ID with a wrong secret while behind: %v", err)
	}
	behind = false
	if _, err := a.Authenticate(bearer(unknown)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("unknown token on a current member: %v", err)
	}
}
