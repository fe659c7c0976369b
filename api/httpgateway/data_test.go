package httpgateway

import (
	"net/http"
	"strings"
	"testing"
)

// TestDataRoutes: every write-path route answers, bad input maps to its
// HTTP status with a JSON error, and nothing changes.
func TestDataRoutes(t *testing.T) {
	before := shared.node.State().AppliedIndex()
	cases := []struct {
		method, path, body string
		status             int
		contains           string
	}{
		{http.MethodGet, "/v1/segments", "", http.StatusOK, "{"},
		{http.MethodGet, "/v1/segments?state=Frozen", "", http.StatusBadRequest, "unknown state"},
		{http.MethodGet, "/v1/segments?collection_id=5&limit=20000", "", http.StatusBadRequest, "limit"},
		{http.MethodGet, "/v1/checkpoints", "", http.StatusOK, "{"},
		{http.MethodGet, "/v1/recovery-info?vchannel=nope", "", http.StatusBadRequest, "not a vchannel name"},
		{http.MethodGet, "/v1/recovery-info?vchannel=dml_0_999v0", "", http.StatusNotFound, "unknown vchannel"},
		{http.MethodGet, "/v1/flush-tasks?node_id=999&epoch=1", "", http.StatusNotFound, "streaming node 999"},
		{http.MethodPost, "/v1/segments/info", `{"segment_ids":["12345"]}`, http.StatusNotFound, "segment 12345"},
		{http.MethodPost, "/v1/segments/info", `{}`, http.StatusBadRequest, "segment ids"},
		{http.MethodPost, "/v1/flush", `{}`, http.StatusBadRequest, "collection_id"},
		{http.MethodPost, "/v1/flush", `{"collection_id":"77"}`, http.StatusNotFound, "collection 77"},
		{http.MethodPost, "/v1/flush/state", `{"collection_id":"77"}`, http.StatusBadRequest, "flush_ts"},
		{http.MethodPost, "/v1/flush-all/state", `{}`, http.StatusBadRequest, "flush_all_ts"},
		{http.MethodPost, "/v1/segments/assign", `{"node_id":"1"}`, http.StatusBadRequest, "requests"},
		{http.MethodPost, "/v1/segments/assign", `{"node_id":"1","requests":[{"collection_id":"77","vchannel":"dml_0_77v0","pchannel_term":"1","rows":"1"}]}`,
			http.StatusNotFound, "collection 77"},
		{http.MethodPost, "/v1/timeticks", `{}`, http.StatusBadRequest, "node_id"},
		{http.MethodPost, "/v1/segments/binlogs", `{"node_id":"1","segment_id":"1","level":"L9"}`, http.StatusBadRequest, "level"},
		{http.MethodPost, "/v1/checkpoints", `{"node_id":"1"}`, http.StatusBadRequest, "checkpoint"},
		{http.MethodPost, "/v1/segments/import", `{"node_id":"1","collection_id":"77","vchannel":"dml_0_77v0","pchannel_term":"1","level":"L0"}`,
			http.StatusBadRequest, "L1 or L2"},
		{http.MethodPost, "/v1/segments/import/finish", `{"node_id":"1","collection_id":"77","vchannel":"dml_0_77v0","pchannel_term":"1","segment_id":"5"}`,
			http.StatusBadRequest, "finishing an import needs a manifest pointer"},
		{http.MethodPost, "/v1/segments/import/finish", `{"node_id":"1","collection_id":"77","vchannel":"dml_0_77v0","pchannel_term":"1","segment_id":"5","num_of_rows":"-1","manifest_path":"{\"ver\":1,\"base_path\":\"a\"}"}`,
			http.StatusBadRequest, "negative row count"},
	}
	for _, c := range cases {
		code, _, body := do(t, c.method, c.path, c.body)
		if code != c.status || !strings.Contains(string(body), c.contains) {
			t.Errorf("%s %s %s: %d %s, want %d containing %q", c.method, c.path, c.body, code, body, c.status, c.contains)
		}
	}
	if after := shared.node.State().AppliedIndex(); after != before {
		t.Fatalf("bad requests moved the applied index from %d to %d", before, after)
	}
}
