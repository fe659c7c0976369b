package httpgateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/testutil"
)

// decodeObject decodes a JSON object, keeping numbers as json.Number when
// exact is set and as float64 otherwise.
func decodeObject(t *testing.T, body []byte, exact bool) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	if exact {
		dec.UseNumber()
	}
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, body)
	}
	return m
}

func TestStatusJSON(t *testing.T) {
	code, ctype, body := do(t, http.MethodGet, "/v1/cluster/status", "")
	if code != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET /v1/cluster/status = %d %q: %s", code, ctype, body)
	}
	m := decodeObject(t, body, false)
	for _, k := range []string{"term", "commit_index", "applied_index", "last_log_index", "established_term", "last_snapshot_index"} {
		if _, ok := m[k].(float64); !ok {
			t.Errorf("%s = %#v (%T); want a JSON number", k, m[k], m[k])
		}
	}
	if m["term"].(float64) < 1 || m["applied_index"].(float64) < 1 {
		t.Errorf("term %v applied_index %v; want both positive", m["term"], m["applied_index"])
	}
	for k, want := range map[string]string{"node_id": shared.self.ID, "state": "Leader", "leader_id": shared.self.ID, "leader_grpc_addr": shared.self.GRPCAddr} {
		if got, ok := m[k].(string); !ok || got != want {
			t.Errorf("%s = %#v; want %q", k, m[k], want)
		}
	}
	members, ok := m["members"].([]any)
	if !ok || len(members) != 1 {
		t.Fatalf("members = %#v; want one member", m["members"])
	}
	mem, ok := members[0].(map[string]any)
	if !ok {
		t.Fatalf("member = %#v; want an object", members[0])
	}
	want := map[string]any{
		"id": shared.self.ID, "raft_addr": shared.self.RaftAddr, "grpc_addr": shared.self.GRPCAddr,
		"http_addr": shared.self.HTTPAddr, "suffrage": "voter", "leader": true,
	}
	if !reflect.DeepEqual(mem, want) {
		t.Errorf("member = %v; want %v", mem, want)
	}
	// 64-bit values are bare numbers, never quoted strings (protojson's
	// default), so scripts can compare them.
	if regexp.MustCompile(`"(term|applied_index|commit_index)":"`).Match(body) {
		t.Errorf("a 64-bit field is rendered as a string: %s", body)
	}

	// Query parameters are request fields.
	code, _, body = do(t, http.MethodGet, "/v1/cluster/members?consistency=STALE", "")
	if code != http.StatusOK || !bytes.Contains(body, []byte(`"http_addr":"`+shared.self.HTTPAddr+`"`)) {
		t.Errorf("GET /v1/cluster/members?consistency=STALE = %d: %s", code, body)
	}
	code, _, body = do(t, http.MethodGet, "/v1/cluster/members", "")
	if code != http.StatusOK || !bytes.Contains(body, []byte(`"id":"`+shared.self.ID+`"`)) {
		t.Errorf("GET /v1/cluster/members = %d: %s", code, body)
	}
}

func TestAllocJSON(t *testing.T) {
	var prevLast uint64
	for i := 0; i < 3; i++ {
		code, ctype, body := do(t, http.MethodPost, "/v1/alloc/timestamp", `{"count":2}`)
		if code != http.StatusOK || ctype != "application/json" {
			t.Fatalf("POST /v1/alloc/timestamp = %d %q: %s", code, ctype, body)
		}
		loose := decodeObject(t, body, false)
		if _, ok := loose["first"].(float64); !ok {
			t.Fatalf("first = %#v; want a JSON number", loose["first"])
		}
		m := decodeObject(t, body, true)
		first, err := strconv.ParseUint(string(m["first"].(json.Number)), 10, 64)
		if err != nil {
			t.Fatalf("first %v is not an exact unsigned integer: %v", m["first"], err)
		}
		if m["count"] != json.Number("2") {
			t.Errorf("count = %v; want 2", m["count"])
		}
		if first <= prevLast {
			t.Errorf("call %d: first %d not above the previous last %d", i, first, prevLast)
		}
		prevLast = first + 1
	}

	code, _, body := do(t, http.MethodPost, "/v1/alloc/id", `{"count":3}`)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/alloc/id = %d: %s", code, body)
	}
	m := decodeObject(t, body, true)
	if first, err := strconv.ParseUint(string(m["first"].(json.Number)), 10, 64); err != nil || first == 0 || m["count"] != json.Number("3") {
		t.Errorf("alloc id response %s; want a positive first and count 3", body)
	}
}

// observed is the state a rejected request must leave alone.
type observed struct {
	Members  string
	NextID   uint64
	DedupLen int
	Config   []raftnode.Server
}

func observe(t *testing.T) observed {
	t.Helper()
	st := shared.node.State()
	o := observed{Members: fmt.Sprint(st.Members()), NextID: st.NextID(), DedupLen: st.DedupLen()}
	var err error
	if o.Config, err = shared.node.Configuration(); err != nil {
		t.Fatalf("configuration: %v", err)
	}
	return o
}

// TestErrors: every bad request gets a 4xx with the JSON error body
// {"error":{"code":..., "message":...}} and changes nothing.
func TestErrors(t *testing.T) {
	self := shared.self
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
		message                  string
	}{
		{"bad JSON", "POST", "/v1/alloc/timestamp", `{"count":`, 400, "InvalidArgument", "bad JSON body"},
		{"not an object", "POST", "/v1/alloc/timestamp", `[1]`, 400, "InvalidArgument", "bad JSON body"},
		{"unknown field", "POST", "/v1/alloc/timestamp", `{"count":1,"bogus":true}`, 400, "InvalidArgument", "bogus"},
		{"wrong type", "POST", "/v1/alloc/id", `{"count":"many"}`, 400, "InvalidArgument", "count"},
		{"negative count", "POST", "/v1/alloc/id", `{"count":-1}`, 400, "InvalidArgument", "count"},
		{"count 0", "POST", "/v1/alloc/timestamp", `{"count":0}`, 400, "InvalidArgument", "count must be in 1..65536, got 0"},
		{"count 65537", "POST", "/v1/alloc/id", `{"count":65537}`, 400, "InvalidArgument", "count must be in 1..65536, got 65537"},
		{"empty body", "POST", "/v1/alloc/timestamp", "", 400, "InvalidArgument", "got 0"},
		{"body too large", "POST", "/v1/alloc/id", `{"count":1` + strings.Repeat(" ", maxBodyBytes) + `}`, 400, "InvalidArgument", "body over"},
		{"wrong method on a POST route", "GET", "/v1/alloc/timestamp", "", 405, "Unimplemented", "method GET not allowed on /v1/alloc/timestamp"},
		{"wrong method on a GET route", "DELETE", "/v1/cluster/status", "", 405, "Unimplemented", "method DELETE not allowed on /v1/cluster/status"},
		{"POST snapshot", "POST", "/v1/snapshot", "", 405, "Unimplemented", "not allowed"},
		{"unknown route", "GET", "/v1/nope", "", 404, "NotFound", "no route for GET /v1/nope"},
		{"bad enum in query", "GET", "/v1/cluster/members?consistency=BOGUS", "", 400, "InvalidArgument", "bad query"},
		{"unknown query parameter", "GET", "/v1/cluster/status?verbose=1", "", 400, "InvalidArgument", "verbose"},
		{"repeated query parameter", "GET", "/v1/cluster/members?consistency=STALE&consistency=STALE", "", 400, "InvalidArgument", "given 2 times"},
		{"remove unknown member", "POST", "/v1/cluster/members/remove", `{"id":"ghost"}`, 404, "NotFound", "ghost"},
		{"remove invalid id", "POST", "/v1/cluster/members/remove", `{"id":"a b"}`, 400, "InvalidArgument", "not allowed"},
		{"transfer to self", "POST", "/v1/cluster/transfer-leader", `{"target_id":"` + self.ID + `"}`, 412, "FailedPrecondition", "already leads"},
		{"transfer to unknown", "POST", "/v1/cluster/transfer-leader", `{"target_id":"ghost"}`, 404, "NotFound", "ghost"},
		{"register non-member", "POST", "/v1/cluster/register", `{"id":"ghost","raft_addr":"127.0.0.1:7"}`, 404, "NotFound", "ghost"},
		{"register bad http addr", "POST", "/v1/cluster/register", `{"id":"` + self.ID + `","raft_addr":"` + self.RaftAddr + `","http_addr":"h:0"}`, 400, "InvalidArgument", "http_addr"},
		{"add voter bad raft addr", "POST", "/v1/cluster/members", `{"id":"n9","raft_addr":"h:99999"}`, 400, "InvalidArgument", "raft_addr"},
		{"add voter address in use", "POST", "/v1/cluster/members", `{"id":"n9","raft_addr":"` + self.RaftAddr + `"}`, 412, "FailedPrecondition", "already used"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := observe(t)
			code, ctype, body := do(t, tc.method, tc.path, tc.body)
			if code != tc.status {
				t.Errorf("status = %d; want %d (%s)", code, tc.status, body)
			}
			if code < 400 || code > 499 {
				t.Errorf("status %d is not a 4xx", code)
			}
			if ctype != "application/json" {
				t.Errorf("Content-Type = %q", ctype)
			}
			var eb struct {
				Error map[string]any `json:"error"`
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&eb); err != nil {
				t.Fatalf("body is not {\"error\":{...}}: %v\n%s", err, body)
			}
			if eb.Error["code"] != tc.code {
				t.Errorf("error.code = %#v; want %q", eb.Error["code"], tc.code)
			}
			msg, _ := eb.Error["message"].(string)
			if !strings.Contains(msg, tc.message) {
				t.Errorf("error.message = %q; want it to contain %q", msg, tc.message)
			}
			for _, internal := range []string{"invalid command: ", "invalid argument: ", "not found: ", "failed precondition: "} {
				if strings.Contains(msg, internal) {
					t.Errorf("error.message = %q carries the internal prefix %q", msg, internal)
				}
			}
			for k := range eb.Error {
				if k != "code" && k != "message" {
					t.Errorf("unexpected error field %q in %s", k, body)
				}
			}
			if after := observe(t); !reflect.DeepEqual(before, after) {
				t.Errorf("a rejected request changed state:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

func TestProbes(t *testing.T) {
	code, _, body := do(t, http.MethodGet, "/healthz", "")
	if code != http.StatusOK || decodeObject(t, body, false)["status"] != "ok" {
		t.Errorf("/healthz = %d %s", code, body)
	}
	// /readyz is 503 "catching up" for the instant between an entry's
	// commit and its apply (the TSO window routine writes in the
	// background), so allow a few tries.
	var m map[string]any
	testutil.Eventually(t, "/readyz to answer 200", func() bool {
		code, _, body = do(t, http.MethodGet, "/readyz", "")
		m = decodeObject(t, body, false)
		return code == http.StatusOK
	})
	if m["status"] != "ready" || m["leader_id"] != shared.self.ID {
		t.Errorf("/readyz = %d %s", code, body)
	}
	for _, k := range []string{"commit_index", "applied_index"} {
		if v, ok := m[k].(float64); !ok || v < 1 {
			t.Errorf("/readyz %s = %#v; want a positive number", k, m[k])
		}
	}
}

// TestReadyzNoLeader: a member that knows no leader is not ready.
func TestReadyzNoLeader(t *testing.T) {
	_, trans := raft.NewInmemTransport("127.0.0.1:3")
	node, err := raftnode.Open(raftnode.Config{ID: "lonely", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:3", Transport: trans})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer func() {
		if err := node.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	rec := httptest.NewRecorder()
	Probes{Node: node}.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no leader known") {
		t.Errorf("/readyz without a leader = %d %s; want 503 no leader known", rec.Code, rec.Body)
	}
}

func TestSnapshotHTTP(t *testing.T) {
	code, ctype, body := do(t, http.MethodGet, "/v1/snapshot", "")
	if code != http.StatusOK || ctype != "application/octet-stream" {
		t.Fatalf("GET /v1/snapshot = %d %q", code, ctype)
	}
	st, err := fsm.ReadSnapshot(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("fsm.ReadSnapshot: %v", err)
	}
	if st.AppliedIndex() == 0 || st.EstablishedTerm() == 0 {
		t.Errorf("snapshot applied %d established term %d; want both positive", st.AppliedIndex(), st.EstablishedTerm())
	}
	if m, ok := st.Member(shared.self.ID); !ok || m.HttpAddr != shared.self.HTTPAddr {
		t.Errorf("snapshot member %s = %v (%v); want the registered addresses", shared.self.ID, m, ok)
	}
}

// TestMetrics checks /metrics carries coordd's own metrics and the ones
// hashicorp/raft and raft-boltdb report through go-metrics. raft-boltdb's
// reach the Prometheus registry only when built with -tags
// hashicorpmetrics (without it they go to armon/go-metrics and this fails).
func TestMetrics(t *testing.T) {
	for i := 0; i < 5; i++ { // some writes, so raft has committed entries to report
		if code, _, body := do(t, http.MethodPost, "/v1/alloc/id", `{"count":70000}`); code != http.StatusBadRequest {
			t.Fatalf("oversized alloc = %d %s", code, body)
		}
		if code, _, body := do(t, http.MethodPost, "/v1/alloc/id", `{"count":65536}`); code != http.StatusOK {
			t.Fatalf("alloc = %d %s", code, body)
		}
	}
	code, ctype, body := do(t, http.MethodGet, "/metrics", "")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("GET /metrics = %d %q", code, ctype)
	}
	values := map[string]float64{} // sample name (labels stripped) → last value
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		if v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64); err == nil {
			values[name] = v
		}
	}
	positive := []string{
		// coordd's own
		"coordd_fsm_applied_index",
		"coordd_fsm_applied_entries_total",
		"coordd_propose_duration_seconds_count",
		"coordd_fsm_members",
		"coordd_raft_term",
		"coordd_is_leader",
		"coordd_raft_log_appends_total",
		// hashicorp/raft's, through the go-metrics sink
		"coordd_raft_apply",
		"coordd_raft_commitTime_count",
		"coordd_raft_state_leader",
		"coordd_raft_peers",
		// raft-wal's, the default log store (needs -tags hashicorpmetrics)
		"coordd_raft_wal_log_appends",
		// Go runtime collector
		"go_goroutines",
	}
	for _, name := range positive {
		if v, ok := values[name]; !ok || v <= 0 {
			t.Errorf("metric %s = %v (present %v); want a positive value", name, v, ok)
		}
	}
	if v, ok := values["coordd_last_snapshot_index"]; !ok || v != 0 {
		t.Errorf("coordd_last_snapshot_index = %v (%v); want 0 before any snapshot", v, ok)
	}
	if v, ok := values["coordd_snapshot_age_seconds"]; !ok || v != -1 {
		t.Errorf("coordd_snapshot_age_seconds = %v (%v); want -1 before any snapshot", v, ok)
	}
	if applied := float64(shared.node.State().AppliedIndex()); values["coordd_fsm_applied_index"] > applied {
		t.Errorf("coordd_fsm_applied_index %v ahead of the FSM's %v", values["coordd_fsm_applied_index"], applied)
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
