package httpgateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// send posts body with the given Content-Type header ("" sends none).
func send(t *testing.T, method, path, ctype, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, shared.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := shared.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data)
}

// TestJSONBodyNeedsJSONContentType: a body that is not declared
// application/json is refused with 415 before anything runs (an HTML form
// cannot declare it, so a cross-site form post cannot reach a route).
func TestJSONBodyNeedsJSONContentType(t *testing.T) {
	before := observe(t)
	body := `{"id":"ghost"}`
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "", "application/jsonx"} {
		code, _, data := send(t, http.MethodPost, "/v1/cluster/members/remove", ct, body)
		if code != http.StatusUnsupportedMediaType || !strings.Contains(data, "Content-Type: application/json") {
			t.Errorf("Content-Type %q: %d %s; want 415", ct, code, data)
		}
	}
	// Declared JSON (with parameters) reaches the handler: 404 for ghost.
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		if code, _, data := send(t, http.MethodPost, "/v1/cluster/members/remove", ct, body); code != http.StatusNotFound {
			t.Errorf("Content-Type %q: %d %s; want the handler's 404", ct, code, data)
		}
	}
	if after := observe(t); before.Members != after.Members {
		t.Errorf("refused requests changed the members: %s -> %s", before.Members, after.Members)
	}
}

// TestMethodNotAllowedNamesAllow: a 405 carries the Allow header.
func TestMethodNotAllowedNamesAllow(t *testing.T) {
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/alloc/timestamp", "POST"},
		{http.MethodDelete, "/v1/cluster/status", "GET"},
		{http.MethodPut, "/v1/cluster/members", "GET, POST"},
		{http.MethodPost, "/healthz", "GET"},
	} {
		code, h, data := send(t, tc.method, tc.path, "", "")
		if code != http.StatusMethodNotAllowed || h.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d, Allow %q (%s); want 405 with Allow %q", tc.method, tc.path, code, h.Get("Allow"), data, tc.allow)
		}
	}
}

// TestDecodeErrorsNameSnakeCaseFields: decoder errors name fields as the
// API documents them (snake_case), not by their JSON-mapping names.
func TestDecodeErrorsNameSnakeCaseFields(t *testing.T) {
	for _, tc := range []struct{ path, body, field, camel string }{
		{"/v1/vchannels", `{"collection_id":"abc","count":1}`, "collection_id", "collectionId"},
		{"/v1/nodes/heartbeat", `{"node_id":true}`, "node_id", "nodeId"},
		{"/v1/broadcasts", `{"message_type":"CreateIndex","ack_sync_up":"yes"}`, "ack_sync_up", "ackSyncUp"},
	} {
		code, _, data := send(t, http.MethodPost, tc.path, "application/json", tc.body)
		var eb struct {
			Error struct{ Message string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(data), &eb)
		if code != http.StatusBadRequest || !strings.Contains(eb.Error.Message, tc.field) || strings.Contains(eb.Error.Message, tc.camel) {
			t.Errorf("%s %s: %d %q; want 400 naming %s", tc.path, tc.body, code, eb.Error.Message, tc.field)
		}
	}
}

// TestOverloadAnswers429WithRetryAfter: a full proposal queue
// (ResourceExhausted) is 429 with a Retry-After in whole seconds; other
// refusals carry no Retry-After.
func TestOverloadAnswers429WithRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		err        error
		code       int
		retryAfter string
	}{
		{status.Error(codes.ResourceExhausted, "proposal queue is full: 64 proposals are waiting"), http.StatusTooManyRequests, "1"},
		{status.Error(codes.FailedPrecondition, "65536 broadcasts pending"), http.StatusPreconditionFailed, ""},
		{status.Error(codes.Unavailable, "not the leader"), http.StatusServiceUnavailable, ""},
	} {
		rec := httptest.NewRecorder()
		writeError(rec, tc.err, "", "")
		if rec.Code != tc.code || rec.Header().Get("Retry-After") != tc.retryAfter {
			t.Errorf("%v: HTTP %d, Retry-After %q; want %d, %q", tc.err, rec.Code, rec.Header().Get("Retry-After"), tc.code, tc.retryAfter)
		}
	}
}
