package httpgateway

import (
	"context"
	"fmt"
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
	for _, r := range []auth.Role{auth.RoleRead, auth.RoleProxy, auth.RoleNode, auth.RoleAdmin} {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		var node uint64
		if r == auth.RoleNode {
			node = 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		res, err := commands.Propose(ctx, shared.node, &logpb.CreateToken{Token: &logpb.TokenRecord{
			Id: tok.ID, Name: "http-" + r.String(), Role: r.TokenRole(), SecretSha256: tok.SecretHash(), NodeId: node}}, "")
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
	roles := []auth.Role{auth.RoleNone, auth.RoleRead, auth.RoleProxy, auth.RoleNode, auth.RoleAdmin}
	before := shared.node.State().AppliedIndex()
	for _, p := range gw.Patterns() {
		need, _ := auth.RouteRole(p)
		for _, r := range roles {
			if r.Includes(need) {
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
			if !r.Includes(need) {
				continue
			}
			if code := send(p, r).StatusCode; code == http.StatusUnauthorized || code == http.StatusForbidden {
				t.Errorf("%s as %s: %d, want it past authorisation", p, r, code)
			}
		}
	}
}

// TestNodeRoutesNeedTheSessionsOwnCredential: over HTTP as over gRPC, a
// route that speaks for a streaming node session (here the heartbeat and
// a checkpoint) accepts only the node token bound to the identity that
// registered the session; another node's token, a proxy token and an
// admin token get 403 and change nothing.
func TestNodeRoutesNeedTheSessionsOwnCredential(t *testing.T) {
	_, hs, tokens := securedGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := commands.Propose(ctx, shared.node, &logpb.RegisterStreamingNode{Address: "127.0.0.1:9911", Incarnation: "http-owner", BoundNode: 91}, "")
	if err != nil || res.Rejection != nil {
		t.Fatalf("register: %v %v", res, err)
	}
	session, epoch := res.GetRegisterNode().NodeId, res.GetRegisterNode().Epoch
	bearer := map[string]string{"proxy": tokens[auth.RoleProxy], "admin": tokens[auth.RoleAdmin]}
	for name, node := range map[string]uint64{"owner": 91, "other": 92} {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		res, err := commands.Propose(ctx, shared.node, &logpb.CreateToken{Token: &logpb.TokenRecord{
			Id: tok.ID, Name: "http-" + name, Role: logpb.TokenRole_TOKEN_ROLE_NODE, NodeId: node, SecretSha256: tok.SecretHash()}}, "")
		if err != nil || res.Rejection != nil {
			t.Fatalf("create token: %v %v", res, err)
		}
		bearer[name] = tok.String()
	}
	post := func(path, body, who string) int {
		req, err := http.NewRequest(http.MethodPost, hs.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+bearer[who])
		resp, err := (&http.Client{Timeout: 2 * callTimeout}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	heartbeat := fmt.Sprintf(`{"node_id":%d,"epoch":%d}`, session, epoch)
	checkpoint := fmt.Sprintf(`{"node_id":%d,"checkpoints":[{"vchannel":"by-dev-rootcoord-dml_0_100v0","pchannel_term":2,"position":{"term":2,"offset":1099511627776,"timestamp":4611686018427388100}}]}`, session)
	before := shared.node.State().AppliedIndex()
	for _, who := range []string{"other", "proxy", "admin"} {
		if code := post("/v1/nodes/heartbeat", heartbeat, who); code != http.StatusForbidden {
			t.Errorf("heartbeat for session %d as %s: %d, want 403", session, who, code)
		}
		if code := post("/v1/checkpoints", checkpoint, who); code != http.StatusForbidden {
			t.Errorf("checkpoint for session %d as %s: %d, want 403", session, who, code)
		}
	}
	if after := shared.node.State().AppliedIndex(); after != before {
		t.Errorf("refused requests moved the applied index from %d to %d", before, after)
	}
	if code := post("/v1/nodes/heartbeat", heartbeat, "owner"); code != http.StatusOK {
		t.Errorf("the owner's heartbeat: %d, want 200", code)
	}
}
