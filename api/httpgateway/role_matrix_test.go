package httpgateway

import (
	"io"
	"net/http"
	"testing"

	"github.com/coordd/coordd/api/auth"
)

// routeExpect is the hand-written expectation of TestRouteRoleMatrix, NOT
// derived from api/auth's table: per route one letter for each of none,
// read, proxy, node, admin — U (401), D (403) or P (anything else). Node
// routes are called with empty bodies here, so the node's answer is a 400
// (P); which session a node may speak for is TestNodeRoutesNeedTheSessions-
// OwnCredential's and api/grpcserver's TestRoleMatrix's business.
var routeExpect = map[string]string{}

func expectRoutes(pattern string, routes ...string) {
	for _, r := range routes {
		routeExpect[r] = pattern
	}
}

func init() {
	expectRoutes("PPPPP", "/", "GET /healthz", "GET /readyz")
	expectRoutes("UPPPP", "GET /metrics", "GET /ui", "GET /v1/openapi.json", "GET /v1/admin/log-level",
		"GET /v1/cluster/status", "GET /v1/cluster/members", "GET /v1/pchannels", "GET /v1/nodes", "GET /v1/vchannels",
		"GET /v1/replicate-config", "GET /v1/broadcasts", "GET /v1/broadcasts/get", "GET /v1/checkpoints",
		"GET /v1/segments", "POST /v1/segments/info", "POST /v1/flush/state", "POST /v1/flush-all/state", "GET /v1/manifests")
	expectRoutes("UDPPP", "POST /v1/alloc/timestamp", "POST /v1/alloc/id", "POST /v1/vchannels", "POST /v1/vchannels/drop",
		"POST /v1/pchannels/report-error", "POST /v1/broadcasts", "GET /v1/recovery-info", "POST /v1/flush", "POST /v1/flush-all",
		"POST /v1/manifests/commit", "POST /v1/manifests/commit-batch")
	expectRoutes("UDDPD", "POST /v1/nodes/register", "POST /v1/nodes/heartbeat", "POST /v1/broadcasts/ack",
		"POST /v1/segments/assign", "POST /v1/timeticks", "GET /v1/flush-tasks", "POST /v1/segments/binlogs",
		"POST /v1/segments/import", "POST /v1/segments/import/finish", "POST /v1/checkpoints")
	expectRoutes("UDDDP", "GET /v1/snapshot", "POST /v1/cluster/members", "POST /v1/cluster/members/remove",
		"POST /v1/cluster/transfer-leader", "POST /v1/cluster/register", "POST /v1/pchannels", "POST /v1/pchannels/rebalance",
		"POST /v1/nodes/drain", "POST /v1/nodes/undrain", "POST /v1/replicate-config", "POST /v1/replicate-config/reset",
		"POST /v1/broadcasts/retry", "POST /v1/broadcasts/abandon", "POST /v1/manifests/gc", "POST /v1/admin/log-level",
		"GET /v1/admin/recent-errors", "POST /v1/tokens", "GET /v1/tokens", "POST /v1/tokens/revoke",
		"GET /debug/pprof/", "GET /debug/pprof/profile", "GET /debug/pprof/symbol", "GET /debug/pprof/trace",
		"GET /debug/raft-delay", "POST /debug/raft-delay", "POST /debug/replay-snapshot")
}

// TestRouteRoleMatrix sends every served route with every credential kind
// and compares the answer with routeExpect; every served route must have
// an expectation.
func TestRouteRoleMatrix(t *testing.T) {
	gw, hs, tokens := securedGateway(t)
	client := &http.Client{Timeout: 4 * callTimeout}
	kinds := []auth.Role{auth.RoleNone, auth.RoleRead, auth.RoleProxy, auth.RoleNode, auth.RoleAdmin}
	for _, p := range gw.Patterns() {
		want, ok := routeExpect[p]
		if !ok {
			t.Errorf("route %q has no hand-written expectation in routeExpect", p)
			continue
		}
		for i, r := range kinds {
			req := requestFor(t, hs.URL, p)
			if r != auth.RoleNone {
				req.Header.Set("Authorization", "Bearer "+tokens[r])
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s as %s: %v", p, r, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := byte('P')
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				got = 'U'
			case http.StatusForbidden:
				got = 'D'
			}
			if got != want[i] {
				t.Errorf("%s as %s: %d (%c), want %c", p, r, resp.StatusCode, got, want[i])
			}
		}
	}
}
