package httpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/apitest"
	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/vocab"
)

// fakeBroadcasts records broadcasts and answers with result.
type fakeBroadcasts struct {
	mu       sync.Mutex
	reqs     []broadcaster.Request
	result   broadcaster.Result
	ackPanic bool     // Ack has a bug
	panics   []string // recovered handler panics (surface and method)
	retryErr error    // what Retry answers
}

func (f *fakeBroadcasts) Broadcast(_ context.Context, c broadcaster.Checked) (broadcaster.Result, error) {
	req := c.Request()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	return f.result, nil
}

func (f *fakeBroadcasts) Ack(context.Context, broadcaster.Ack) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ackPanic {
		panic("ack bug")
	}
	return nil
}

// Retry answers retryErr: the broadcaster, not the API, refuses a task
// that is not pending.
func (f *fakeBroadcasts) Retry(uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retryErr
}
func (f *fakeBroadcasts) Abandon(context.Context, uint64, string) error { return nil }

func (f *fakeBroadcasts) requests() []broadcaster.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// broadcastGateway is a single-member node of its own (the shared one has
// no broadcaster) with a fake broadcaster, streaming initialized, and the
// gateway served by httptest (no metrics: those belong to the shared node).
type broadcastGateway struct {
	node *raftnode.Node
	fake *fakeBroadcasts
	http *httptest.Server
}

const (
	gwP0    = "by-dev-rootcoord-dml_0"
	gwP1    = "by-dev-rootcoord-dml_1"
	gwCChan = gwP0 + vocab.CChannelSuffix
)

func startBroadcastGateway(t *testing.T) *broadcastGateway {
	t.Helper()
	g := &broadcastGateway{fake: &fakeBroadcasts{}}
	n := apitest.StartT(t, apitest.Config{ID: "bg1", RaftAddr: "127.0.0.1:4", Logger: hclog.NewNullLogger(), HTTP: true, SkipRegister: true,
		Routines: routines.Config{Doubles: routines.Doubles{Broadcasts: g.fake}},
		Serve: func(n *apitest.Node) (apitest.Services, error) {
			srv := grpcserver.New(n.Raft, n.Self, hclog.NewNullLogger(), n.Routines,
				grpcserver.WithPanicObserver(func(surface, method string) {
					g.fake.mu.Lock()
					defer g.fake.mu.Unlock()
					g.fake.panics = append(g.fake.panics, surface+" "+method)
				}))
			return apitest.Services{HTTP: New(srv, Probes{Node: n.Raft}, http.NotFoundHandler()), Close: srv.Close}, nil
		}})
	g.node, g.http = n.Raft, n.HTTP
	g.commit(t, &logpb.InitStreaming{ClusterId: "by-dev", Pchannels: []string{gwP0, gwP1}})
	return g
}

func (g *broadcastGateway) commit(t *testing.T, body proto.Message) *logpb.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := commands.Propose(ctx, g.node, body, "")
	if err != nil || res.Rejection != nil {
		t.Fatalf("propose %T: %v %v", body, err, res.GetRejection())
	}
	return res
}

func (g *broadcastGateway) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, g.http.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := g.http.Client()
	c.Timeout = callTimeout
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// keysOf returns the sorted keys of a JSON object.
func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func number(t *testing.T, m map[string]any, k string) string {
	t.Helper()
	n, ok := m[k].(json.Number)
	if !ok {
		t.Fatalf("%s = %#v (%T); want a JSON number", k, m[k], m[k])
	}
	return n.String()
}

// TestBroadcastPostJSON: POST /v1/broadcasts takes a BroadcastRequest in
// JSON and answers {broadcast_id, append_results, duplicated,
// lock_wait_ms} with 64-bit values as bare numbers.
func TestBroadcastPostJSON(t *testing.T) {
	g := startBroadcastGateway(t)
	g.fake.result = broadcaster.Result{BroadcastID: 1<<62 + 3, Duplicated: true, LockWait: 1234 * time.Millisecond,
		Checkpoints: []*logpb.VChannelCheckpoint{{Vchannel: gwCChan, Term: 3, Offset: 1<<63 + 1, TimeTick: 1<<60 + 7}}}
	body := `{"message_type":"AlterCollection","payload":"AQID","ack_sync_up":true,
		"resource_keys":[{"domain":"collection_name","key":"db1:c1"},{"domain":"DB_NAME","key":"db1","shared":true}],
		"vchannels":["` + gwCChan + `","` + gwP1 + `_9v0"],
		"idempotency_key":{"scope":"COLLECTION","scope_id":9,"key":"evt:1"}}`
	code, data := g.do(t, http.MethodPost, "/v1/broadcasts", body)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/broadcasts = %d %s", code, data)
	}
	m := decodeObject(t, data, true)
	if got := keysOf(m); !reflect.DeepEqual(got, []string{"append_results", "broadcast_id", "duplicated", "lock_wait_ms"}) {
		t.Errorf("fields %v", got)
	}
	if number(t, m, "broadcast_id") != "4611686018427387907" || number(t, m, "lock_wait_ms") != "1234" || m["duplicated"] != true {
		t.Errorf("response %s", data)
	}
	results, ok := m["append_results"].([]any)
	if !ok || len(results) != 1 {
		t.Fatalf("append_results = %#v", m["append_results"])
	}
	r0 := results[0].(map[string]any)
	if got := keysOf(r0); !reflect.DeepEqual(got, []string{"offset", "term", "time_tick", "vchannel"}) {
		t.Errorf("append_results[0] fields %v", got)
	}
	if r0["vchannel"] != gwCChan || number(t, r0, "term") != "3" || number(t, r0, "offset") != "9223372036854775809" ||
		number(t, r0, "time_tick") != "1152921504606846983" {
		t.Errorf("append_results[0] = %v", r0)
	}
	if regexp.MustCompile(`"(broadcast_id|offset|time_tick|lock_wait_ms)":"`).Match(data) {
		t.Errorf("a 64-bit field is a string: %s", data)
	}

	reqs := g.fake.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d broadcasts, want 1", len(reqs))
	}
	want := broadcaster.Request{MessageType: "AlterCollection", Payload: []byte{1, 2, 3}, AckSyncUp: true,
		VChannels: []string{gwCChan, gwP1 + "_9v0"}, IdempotencyKey: "coll/9/5:evt:1"}
	got := reqs[0]
	wantKeys := []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "db1:c1"}, {Domain: logpb.ResourceDomain_RK_DB_NAME, Key: "db1", Shared: true}}
	if len(got.ResourceKeys) != 2 || !proto.Equal(got.ResourceKeys[0], wantKeys[0]) || !proto.Equal(got.ResourceKeys[1], wantKeys[1]) {
		t.Errorf("resource keys %v", got.ResourceKeys)
	}
	got.ResourceKeys = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("broadcaster got %+v\nwant %+v", got, want)
	}

	// No targets: passed on without targets (the broadcaster chooses them);
	// an empty result list is [].
	g.fake.result = broadcaster.Result{BroadcastID: 5}
	code, data = g.do(t, http.MethodPost, "/v1/broadcasts", `{"message_type":"FlushAll"}`)
	if code != http.StatusOK || !bytes.Contains(data, []byte(`"append_results":[]`)) || !bytes.Contains(data, []byte(`"broadcast_id":5`)) {
		t.Fatalf("FlushAll = %d %s", code, data)
	}
	if reqs = g.fake.requests(); len(reqs[1].VChannels) != 0 {
		t.Errorf("FlushAll targets %v", reqs[1].VChannels)
	}

	// Bad input: 400 with the JSON error body, nothing broadcast.
	for _, tc := range []struct{ body, message string }{
		{`{"message_type":"AlterCollection","resource_keys":[{"domain":"TABLE","key":"t"}]}`, `unknown resource key domain \"TABLE\"`},
		{`{"message_type":"Custom Type"}`, "not allowed"},
		{`{"message_type":"AlterCollection","idempotency_key":{"scope":"TENANT","key":"k"}}`, "idempotency scope"},
		{`{"message_type":"AlterCollection","vchannels":["x"]}`, "vchannel name"},
		{`{"message_type":"AlterCollection","bogus":1}`, "bogus"},
	} {
		code, data := g.do(t, http.MethodPost, "/v1/broadcasts", tc.body)
		if code != http.StatusBadRequest || !bytes.Contains(data, []byte(`"code":"InvalidArgument"`)) || !bytes.Contains(data, []byte(tc.message)) {
			t.Errorf("POST %s = %d %s; want 400 mentioning %q", tc.body, code, data, tc.message)
		}
	}
	if n := len(g.fake.requests()); n != 2 {
		t.Errorf("%d broadcasts after bad input, want 2", n)
	}
}

var broadcastInfoFields = []string{"abandoned_reason", "ack_sync_up", "acked", "broadcast_id", "callback_attempts", "created_unix_ms",
	"idempotency_key", "last_error", "message_type", "payload_bytes", "resource_keys", "state", "tombstoned_unix_ms", "vchannels"}

// TestBroadcastListJSON: GET /v1/broadcasts answers {"broadcasts":[...]}
// with every BroadcastInfo field; pending_only and limit are query
// parameters. GET /v1/broadcasts/get has the same shape for one task.
func TestBroadcastListJSON(t *testing.T) {
	g := startBroadcastGateway(t)
	code, data := g.do(t, http.MethodGet, "/v1/broadcasts", "")
	if code != http.StatusOK || strings.TrimSpace(string(data)) != `{"broadcasts":[]}` {
		t.Fatalf("empty list = %d %s", code, data)
	}

	v := vocab.VChannelName(gwP1, 9, 0)
	idem, _ := vocab.DatabaseScopedKey(3, "k")
	done := g.commit(t, &logpb.CreateBroadcast{MessageType: "AlterCollection", Payload: []byte("abcd"), Vchannels: []string{gwCChan, v}, AckSyncUp: true,
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_DB_NAME, Key: "db3", Shared: true}}, IdempotencyKey: idem}).GetBroadcast().GetBroadcastId()
	g.commit(t, &logpb.AckBroadcast{BroadcastId: done, Checkpoints: []*logpb.VChannelCheckpoint{
		{Vchannel: gwCChan, Term: 2, Offset: 1 << 63, TimeTick: 1 << 60}, {Vchannel: v, Term: 2, Offset: 4, TimeTick: 1<<60 + 1}}})
	g.commit(t, &logpb.CompleteBroadcast{BroadcastId: done})
	g.commit(t, &logpb.CreateBroadcast{MessageType: "DropPartition", Vchannels: []string{gwCChan}}) // pending
	abandoned := g.commit(t, &logpb.CreateBroadcast{MessageType: "DropPartition", Vchannels: []string{gwCChan}}).GetBroadcast().GetBroadcastId()
	g.commit(t, &logpb.AbandonBroadcast{BroadcastId: abandoned, Reason: "gave up"})

	list := func(query string) []map[string]any {
		t.Helper()
		code, data := g.do(t, http.MethodGet, "/v1/broadcasts"+query, "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/broadcasts%s = %d %s", query, code, data)
		}
		m := decodeObject(t, data, true)
		if got := keysOf(m); !reflect.DeepEqual(got, []string{"broadcasts"}) {
			t.Fatalf("fields %v", got)
		}
		var out []map[string]any
		for _, b := range m["broadcasts"].([]any) {
			out = append(out, b.(map[string]any))
		}
		return out
	}
	all := list("")
	if len(all) != 3 {
		t.Fatalf("%d broadcasts, want 3", len(all))
	}
	b := all[0]
	if got := keysOf(b); !reflect.DeepEqual(got, broadcastInfoFields) {
		t.Errorf("fields %v\nwant   %v", got, broadcastInfoFields)
	}
	for k, want := range map[string]any{"message_type": "AlterCollection", "state": "TOMBSTONE", "ack_sync_up": true, "idempotency_key": "db/3/1:k",
		"last_error": "", "abandoned_reason": ""} {
		if b[k] != want {
			t.Errorf("%s = %#v, want %#v", k, b[k], want)
		}
	}
	for k, want := range map[string]string{"callback_attempts": "0", "payload_bytes": "0"} { // a tombstone keeps no payload
		if got := number(t, b, k); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	if number(t, b, "broadcast_id") == "0" || number(t, b, "created_unix_ms") == "0" || number(t, b, "tombstoned_unix_ms") == "0" {
		t.Errorf("zero id or times: %v", b)
	}
	wantKeys := []any{map[string]any{"domain": "DB_NAME", "key": "db3", "shared": true}, map[string]any{"domain": "CLUSTER", "key": "", "shared": true}}
	if !reflect.DeepEqual(b["resource_keys"], wantKeys) {
		t.Errorf("resource_keys = %v, want %v", b["resource_keys"], wantKeys)
	}
	if !reflect.DeepEqual(b["vchannels"], []any{gwCChan, v}) {
		t.Errorf("vchannels = %v", b["vchannels"])
	}
	acked := b["acked"].([]any)
	a0 := acked[0].(map[string]any)
	if len(acked) != 2 || a0["vchannel"] != gwCChan || number(t, a0, "offset") != "9223372036854775808" || number(t, a0, "time_tick") != "1152921504606846976" {
		t.Errorf("acked = %v", acked)
	}
	if all[2]["abandoned_reason"] != "gave up" || all[1]["state"] != "PENDING" || number(t, all[1], "tombstoned_unix_ms") != "0" {
		t.Errorf("tasks 2, 3 = %v, %v", all[1], all[2])
	}

	ids := func(bs []map[string]any) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b["broadcast_id"].(json.Number).String())
		}
		return out
	}
	t.Run("pending_only", func(t *testing.T) {
		// Query parameters take their field's JSON type (a bool here).
		if code, data := g.do(t, http.MethodGet, "/v1/broadcasts?pending_only=true", ""); code == http.StatusBadRequest &&
			bytes.Contains(data, []byte("invalid value for bool field")) {
			t.Fatalf("bool query parameters must be accepted: %s", data)
		}
		if got, want := ids(list("?pending_only=true")), ids(all[1:2]); !slices.Equal(got, want) {
			t.Errorf("pending_only: %v, want %v", got, want)
		}
	})
	if got, want := ids(list("?limit=2&consistency=STALE")), ids(all[1:]); !slices.Equal(got, want) {
		t.Errorf("limit 2: %v, want %v", got, want)
	}
	code, data = g.do(t, http.MethodGet, "/v1/broadcasts?limit=10001", "")
	if code != http.StatusBadRequest || !bytes.Contains(data, []byte("limit must be at most 10000")) {
		t.Errorf("limit 10001 = %d %s", code, data)
	}

	// One task: the same object as in the list.
	code, data = g.do(t, http.MethodGet, "/v1/broadcasts/get?broadcast_id="+ids(all[:1])[0], "")
	if code != http.StatusOK || !reflect.DeepEqual(decodeObject(t, data, true), all[0]) {
		t.Errorf("get = %d %s", code, data)
	}
	code, data = g.do(t, http.MethodGet, "/v1/broadcasts/get?broadcast_id=999999", "")
	if code != http.StatusNotFound || !bytes.Contains(data, []byte(`"code":"NotFound"`)) {
		t.Errorf("get unknown = %d %s", code, data)
	}
	// Retry and abandon carry the broadcaster's refusal of a finished task
	// and need a reason.
	g.fake.mu.Lock()
	g.fake.retryErr = fmt.Errorf("broadcast %s is already finished: %w", ids(all[:1])[0], broadcaster.ErrTaskFinished)
	g.fake.mu.Unlock()
	code, data = g.do(t, http.MethodPost, "/v1/broadcasts/retry", `{"broadcast_id":`+ids(all[:1])[0]+`}`)
	if code != http.StatusPreconditionFailed || !bytes.Contains(data, []byte("already finished")) {
		t.Errorf("retry finished = %d %s", code, data)
	}
	code, data = g.do(t, http.MethodPost, "/v1/broadcasts/abandon", `{"broadcast_id":`+ids(all[1:2])[0]+`}`)
	if code != http.StatusBadRequest || !bytes.Contains(data, []byte("needs a reason")) {
		t.Errorf("abandon without reason = %d %s", code, data)
	}
	code, data = g.do(t, http.MethodPost, "/v1/broadcasts/abandon", `{"broadcast_id":`+ids(all[1:2])[0]+`,"reason":"r"}`)
	if code != http.StatusOK || strings.TrimSpace(string(data)) != "{}" {
		t.Errorf("abandon = %d %s", code, data)
	}
}

// TestHandlerPanicAnswers500: a panicking handler behind the gateway is
// answered 500 Internal and counted; the gateway keeps serving.
func TestHandlerPanicAnswers500(t *testing.T) {
	g := startBroadcastGateway(t)
	g.fake.mu.Lock()
	g.fake.ackPanic = true
	g.fake.mu.Unlock()
	ack := `{"broadcast_id":1,"node_id":1,"epoch":1,"checkpoints":[{"vchannel":"` + gwCChan + `","term":1,"time_tick":"1"}]}`
	code, body := g.do(t, http.MethodPost, "/v1/broadcasts/ack", ack)
	if code != http.StatusInternalServerError || !strings.Contains(string(body), `"Internal"`) || !strings.Contains(string(body), "internal error in POST /v1/broadcasts/ack") {
		t.Fatalf("ack with a panicking handler = %d %s; want 500 Internal naming the route", code, body)
	}
	g.fake.mu.Lock()
	g.fake.ackPanic = false
	panics := append([]string(nil), g.fake.panics...)
	g.fake.mu.Unlock()
	if len(panics) != 1 || panics[0] != "http POST /v1/broadcasts/ack" {
		t.Errorf("observer saw %v, want one http panic on the ack route", panics)
	}
	if code, body := g.do(t, http.MethodPost, "/v1/broadcasts/ack", ack); code != http.StatusOK {
		t.Fatalf("after a recovered panic: %d %s", code, body)
	}
}
