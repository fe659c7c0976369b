package httpgateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// securedGateway serves the shared node through a gateway whose server
// checks credentials, with pprof and fault injection on (coordd
// --enable-pprof --fault-injection), and returns
// it with one bearer token per role.
func securedGateway(t *testing.T) (*Gateway, *httptest.Server, map[auth.Role]string) {
	t.Helper()
	srv := grpcserver.New(shared.node, shared.self, hclog.NewNullLogger(), shared.Routines, grpcserver.WithAuth())
	t.Cleanup(srv.Close)
	gw := New(srv, Probes{Node: shared.node}, shared.metrics.Handler(), WithPprof(), WithFaultInjection(fakeDelays{}))
	hs := httptest.NewServer(gw)
	t.Cleanup(hs.Close)
	tokens := map[auth.Role]string{}
	for _, r := range []auth.Role{auth.RoleRead, auth.RoleNode, auth.RoleAdmin} {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		res, err := commands.Propose(ctx, shared.node, &logpb.CreateToken{Token: &logpb.TokenRecord{
			Id: tok.ID, Name: "http-" + r.String(), Role: r.TokenRole(), SecretSha256: tok.SecretHash()}}, "")
		cancel()
		if err != nil || res.Rejection != nil {
			t.Fatalf("create token: %v %v", res, err)
		}
		tokens[r] = tok.String()
	}
	return gw, hs, tokens
}

// requestFor turns a ServeMux pattern into a request that reaches it.
func requestFor(t *testing.T, base, pattern string) *http.Request {
	t.Helper()
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	switch path {
	case "/":
		path = "/no/such/route"
	case "/debug/pprof/profile", "/debug/pprof/trace":
		path += "?seconds=1"
	}
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// TestEveryRouteHasARow: every route the gateway serves has a row in
// auth's route table, and every row is served. A new route without a row
// fails here.
func TestEveryRouteHasARow(t *testing.T) {
	gw, _, _ := securedGateway(t)
	served := map[string]bool{}
	for _, p := range gw.Patterns() {
		served[p] = true
		if _, known := auth.RouteRole(p); !known {
			t.Errorf("HTTP route %q has no row in api/auth's route table (it defaults to admin)", p)
		}
	}
	for p := range auth.RouteTable() {
		if !served[p] {
			t.Errorf("route table row %q is not served", p)
		}
	}
}

// TestEveryRouteEveryRole walks every route with every role: no
// credentials → 401 (with WWW-Authenticate), a role below the route's →
// 403, refusals change nothing; enough rights get past authorisation.
func TestEveryRouteEveryRole(t *testing.T) {
	gw, hs, tokens := securedGateway(t)
	client := &http.Client{Timeout: 2 * callTimeout}
	send := func(pattern string, r auth.Role) *http.Response {
		req := requestFor(t, hs.URL, pattern)
		if r != auth.RoleNone {
			req.Header.Set("Authorization", "Bearer "+tokens[r])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s as %s: %v", pattern, r, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	roles := []auth.Role{auth.RoleNone, auth.RoleRead, auth.RoleNode, auth.RoleAdmin}
	before := shared.node.State().AppliedIndex()
	for _, p := range gw.Patterns() {
		need, _ := auth.RouteRole(p)
		for _, r := range roles {
			if need == auth.RoleNone || r >= need {
				continue
			}
			resp := send(p, r)
			want := http.StatusForbidden
			if r == auth.RoleNone {
				want = http.StatusUnauthorized
				if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s without credentials: no WWW-Authenticate: Bearer header", p)
				}
			}
			if resp.StatusCode != want {
				t.Errorf("%s as %s: %d, want %d", p, r, resp.StatusCode, want)
			}
		}
	}
	if after := shared.node.State().AppliedIndex(); after != before {
		t.Errorf("refused requests moved the applied index from %d to %d", before, after)
	}
	for _, p := range gw.Patterns() {
		need, _ := auth.RouteRole(p)
		for _, r := range roles {
			if r < need {
				continue
			}
			if code := send(p, r).StatusCode; code == http.StatusUnauthorized || code == http.StatusForbidden {
				t.Errorf("%s as %s: %d, want it past authorisation", p, r, code)
			}
		}
	}
}
