package httpgateway

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/coordd/coordd/api/coordpb"
)

// linesWith returns the log lines written since mark that contain s.
func linesWith(since int, s string) []string {
	var out []string
	for _, l := range strings.Split(shared.logOut.String()[since:], "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// TestLogLevelAtRuntime: the level is read and changed over HTTP, takes
// effect at once (debug lines appear), and a bad level is refused with 400
// and changes nothing.
func TestLogLevelAtRuntime(t *testing.T) {
	t.Cleanup(func() { _, _ = shared.logs.SetLevel("info") })
	code, _, body := do(t, http.MethodGet, "/v1/admin/log-level", "")
	if m := decodeObject(t, body, false); code != 200 || m["level"] != "info" || m["node_id"] != shared.self.ID {
		t.Fatalf("GET log-level: %d %s", code, body)
	}
	mark := len(shared.logOut.String())
	do(t, http.MethodGet, "/v1/cluster/status", "")
	if got := linesWith(mark, "http call"); len(got) != 0 {
		t.Fatalf("debug line at info: %q", got)
	}
	code, _, sbody := send(t, http.MethodPost, "/v1/admin/log-level", "application/json", `{"level":"DEBUG"}`)
	if m := decodeObject(t, []byte(sbody), false); code != 200 || m["level"] != "debug" || m["previous"] != "info" {
		t.Fatalf("POST log-level debug: %d %s", code, sbody)
	}
	do(t, http.MethodGet, "/v1/cluster/status", "")
	if got := linesWith(mark, "GET /v1/cluster/status"); len(got) != 1 {
		t.Fatalf("want one debug line for the status call at debug, got %q", got)
	}
	for _, bad := range []string{`{"level":"loud"}`, `{"level":""}`, `{"lvl":"info"}`} {
		code, _, sbody = send(t, http.MethodPost, "/v1/admin/log-level", "application/json", bad)
		if code != http.StatusBadRequest || !strings.Contains(sbody, "InvalidArgument") {
			t.Errorf("POST %s: %d %s, want 400 InvalidArgument", bad, code, sbody)
		}
	}
	if shared.logs.Level() != "debug" {
		t.Fatalf("a refused change moved the level to %s", shared.logs.Level())
	}
}

// TestRequestIDInEveryLine: every line logged while serving one request,
// over HTTP or gRPC, names its request ID; HTTP sends the ID back.
func TestRequestIDInEveryLine(t *testing.T) {
	t.Cleanup(func() { _, _ = shared.logs.SetLevel("info") })
	req, _ := http.NewRequest(http.MethodPost, shared.http.URL+"/v1/admin/log-level", strings.NewReader(`{"level":"debug"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "req-http-1")
	mark := len(shared.logOut.String())
	resp, err := shared.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Request-Id") != "req-http-1" {
		t.Errorf("X-Request-Id answered %q", resp.Header.Get("X-Request-Id"))
	}
	// Two lines: the level change (WARN) and the call itself (DEBUG).
	changed, calls := linesWith(mark, "log level changed"), linesWith(mark, "http call")
	if len(changed) != 1 || len(calls) != 1 {
		t.Fatalf("lines: %q %q", changed, calls)
	}
	for _, l := range append(changed, calls...) {
		if !strings.Contains(l, "request_id=req-http-1") {
			t.Errorf("line without the request ID: %s", l)
		}
	}

	// Without an ID the gateway makes one and sends it back.
	resp, err = shared.client.Get(shared.http.URL + "/v1/cluster/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req-") || len(linesWith(mark, "request_id="+id)) != 1 {
		t.Errorf("fresh ID %q not sent back or not logged", id)
	}

	// gRPC: the caller's x-request-id metadata names the lines.
	mark = len(shared.logOut.String())
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "req-grpc-1")
	if _, err := coordpb.NewDiagnosticsClient(shared.Conn).SetLogLevel(ctx, &coordpb.SetLogLevelRequest{Level: "trace"}); err != nil {
		t.Fatal(err)
	}
	changed, calls = linesWith(mark, "log level changed"), linesWith(mark, "grpc call")
	if len(changed) != 1 || len(calls) != 1 {
		t.Fatalf("lines: %q %q", changed, calls)
	}
	for _, l := range append(changed, calls...) {
		if !strings.Contains(l, "request_id=req-grpc-1") {
			t.Errorf("line without the request ID: %s", l)
		}
	}
}

// TestRecentErrors: an error the member logs while serving a request is
// answered by /v1/admin/recent-errors with its request ID; lines below
// error are not; limit keeps the newest.
func TestRecentErrors(t *testing.T) {
	ctx, _ := shared.srv.WithRequestLogger(context.Background(), &coordpb.AllocIDRequest{})
	ctx = metadata.NewIncomingContext(ctx, nil)
	shared.srv.Logger(ctx).Warn("not kept")
	shared.srv.Logger(ctx).Error("bolt is gone", "path", "/x")
	shared.srv.Logger(ctx).Error("second failure")
	code, _, body := do(t, http.MethodGet, "/v1/admin/recent-errors?limit=2", "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	m := decodeObject(t, body, false)
	entries, _ := m["entries"].([]any)
	if len(entries) != 2 {
		t.Fatalf("entries: %s", body)
	}
	first := entries[0].(map[string]any)
	if first["message"] != "bolt is gone" || first["level"] != "error" || !strings.Contains(first["json"].(string), `"request_id":"req-`) ||
		!strings.Contains(first["json"].(string), `"path":"/x"`) {
		t.Errorf("first entry: %v", first)
	}
	if strings.Contains(string(body), "not kept") {
		t.Error("a warning was kept")
	}
	if code, _, body := do(t, http.MethodGet, "/v1/admin/recent-errors?limit=-1", ""); code != http.StatusBadRequest {
		t.Errorf("limit=-1: %d %s", code, body)
	}
}
