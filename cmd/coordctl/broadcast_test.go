package main

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/client/clienttest"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

var broadcastMethods = []string{"Broadcast", "Ack", "GetBroadcast", "ListBroadcasts", "RetryBroadcast", "AbandonBroadcast"}

// TestBroadcastBadInput: every malformed broadcast command line exits 2
// with one line on stderr and sends nothing.
func TestBroadcastBadInput(t *testing.T) {
	fc := sampleCluster(t, 1)
	replicateHex := hex.EncodeToString(mustMarshal(t, &logpb.ReplicateConfiguration{}))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"broadcast"}, "broadcast: missing command"},
		{[]string{"broadcast", "shout"}, `broadcast: unknown command "shout"`},
		{[]string{"broadcast", "send"}, "broadcast send: want TYPE, got 0"},
		{[]string{"broadcast", "send", "A", "B"}, "want TYPE, got 2"},
		{[]string{"broadcast", "send", "Create-Collection"}, `TYPE: message type "Create-Collection"`},
		{[]string{"broadcast", "send", strings.Repeat("T", 65)}, "TYPE: message type must be 1..64 bytes"},
		{[]string{"broadcast", "send", ""}, "TYPE: message type must be 1..64 bytes, got 0"},
		{[]string{"broadcast", "send", "CreateCollection"}, "CreateCollection needs --collection-id and --shards (or --payload-hex)"},
		{[]string{"broadcast", "send", "CreateCollection", "--collection-id", "5"}, "CreateCollection needs --shards"},
		{[]string{"broadcast", "send", "CreateCollection", "--shards", "2"}, "CreateCollection needs --collection-id"},
		{[]string{"broadcast", "send", "CreateCollection", "--collection-id", "0", "--shards", "2"}, "--collection-id must be a positive integer, got 0"},
		{[]string{"broadcast", "send", "CreateCollection", "--collection-id", "-5", "--shards", "2"}, "--collection-id must be a positive integer"},
		{[]string{"broadcast", "send", "CreateCollection", "--collection-id", "5", "--shards", "0"}, "--shards must be in 1..1024, got 0"},
		{[]string{"broadcast", "send", "CreateCollection", "--collection-id", "5", "--shards", "1025"}, "--shards must be in 1..1024"},
		{[]string{"broadcast", "send", "CreateCollection", "--collection-id", "5", "--shards", "-1"}, "invalid value"},
		{[]string{"broadcast", "send", "CreateCollection", "--collection-id", "5", "--shards", "2", "--payload-hex", "08"}, "either --payload-hex or --collection-id/--shards, not both"},
		{[]string{"broadcast", "send", "DropCollection", "--collection-id", "5", "--payload-hex", ""}, "not both"},
		{[]string{"broadcast", "send", "DropCollection"}, "DropCollection needs --collection-id (or --payload-hex)"},
		{[]string{"broadcast", "send", "DropCollection", "--collection-id", "5", "--shards", "2"}, "DropCollection takes no --shards"},
		{[]string{"broadcast", "send", "FlushAll", "--collection-id", "5"}, "use --payload-hex for FlushAll"},
		{[]string{"broadcast", "send", "CreateCollection", "--payload-hex", "zz"}, "--payload-hex: encoding/hex"},
		{[]string{"broadcast", "send", "CreateCollection", "--payload-hex", "0805"}, "CreateCollection payload needs a positive collection id and 1..1024 shards, got 5 and 0"},
		{[]string{"broadcast", "send", "CreateCollection", "--payload-hex", "ff"}, "not a CreateCollectionPayload"},
		{[]string{"broadcast", "send", "DropCollection", "--payload-hex", ""}, "DropCollection payload needs a positive collection id, got 0"},
		{[]string{"broadcast", "send", "AlterReplicateConfig", "--payload-hex", replicateHex}, "AlterReplicateConfig payload: replicate configuration needs 1..64 clusters"},
		{[]string{"broadcast", "send", "Custom", "--payload-hex", strings.Repeat("00", vocab.MaxBroadcastPayload+1)}, "payload is 524289 bytes"},
		{[]string{"broadcast", "send", "Custom", "--key", "TABLE:t1"}, `--key "TABLE:t1": unknown domain "TABLE"`},
		{[]string{"broadcast", "send", "Custom", "--key", ""}, `unknown domain ""`},
		{[]string{"broadcast", "send", "Custom", "--key", "CLUSTER:x"}, "takes no key"},
		{[]string{"broadcast", "send", "Custom", "--key", "DB_NAME"}, "needs a key"},
		{[]string{"broadcast", "send", "Custom", "--key", "db_name:shared"}, "needs a key"},
		{[]string{"broadcast", "send", "Custom", "--vchannel", "nope"}, `"nope"`},
		{[]string{"broadcast", "send", "Custom", "--vchannel", "dml_0", "--vchannel", "dml_0"}, "target dml_0 listed twice"},
		{[]string{"broadcast", "send", "Custom", "--idempotency", ""}, `--idempotency "": want SCOPE:ID:KEY`},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "CLUSTER:k"}, "want SCOPE:ID:KEY"},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "TENANT:1:k"}, `idempotency scope must be CLUSTER, DATABASE or COLLECTION, got "TENANT"`},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "CLUSTER:3:k"}, "takes scope id 0, got 3"},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "DATABASE:0:k"}, "database id must be positive"},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "COLLECTION:x:k"}, `ID must be a non-negative integer, got "x"`},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "COLLECTION:-1:k"}, "ID must be a non-negative integer"},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "COLLECTION:5:"}, "idempotency key must be 1..256 bytes, got 0"},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "CLUSTER:0:" + strings.Repeat("k", 257)}, "got 257"},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "CLUSTER:0:a\x01b"}, "not printable ASCII"},
		{[]string{"broadcast", "send", "Custom", "--ack-sync-up=maybe"}, "invalid boolean value"},
		{[]string{"broadcast", "send", "Custom", "--timeout", "0s"}, "bad --timeout"},
		{[]string{"broadcast", "get"}, "broadcast get: want ID, got 0"},
		{[]string{"broadcast", "get", "1", "2"}, "want ID, got 2"},
		{[]string{"broadcast", "get", "0"}, `broadcast ID must be a positive integer, got "0"`},
		{[]string{"broadcast", "get", "-1"}, "broadcast ID must be a positive integer"},
		{[]string{"broadcast", "get", "x7"}, "broadcast ID must be a positive integer"},
		{[]string{"broadcast", "get", "18446744073709551616"}, "broadcast ID must be a positive integer"},
		{[]string{"broadcast", "list", "x"}, "broadcast list: want no arguments"},
		{[]string{"broadcast", "list", "--limit", "10001"}, "--limit must be in 0..10000, got 10001"},
		{[]string{"broadcast", "list", "--limit", "-1"}, "--limit must be in 0..10000, got -1"},
		{[]string{"broadcast", "list", "--limit", "many"}, "invalid value"},
		{[]string{"broadcast", "list", "--pending=sometimes"}, "invalid boolean value"},
		{[]string{"broadcast", "retry"}, "broadcast retry: want ID, got 0"},
		{[]string{"broadcast", "retry", "0"}, "broadcast ID must be a positive integer"},
		{[]string{"broadcast", "retry", "1", "--reason", "x"}, "flag provided but not defined: -reason"},
		{[]string{"broadcast", "abandon", "7"}, "broadcast abandon: --reason is required"},
		{[]string{"broadcast", "abandon", "7", "--reason", "  "}, "--reason is required"},
		{[]string{"broadcast", "abandon", "7", "--reason"}, "flag needs an argument"},
		{[]string{"broadcast", "abandon", "7", "--reason", strings.Repeat("r", 1025)}, "--reason is 1025 bytes (max 1024)"},
		{[]string{"broadcast", "abandon", "0", "--reason", "x"}, "broadcast ID must be a positive integer"},
		{[]string{"broadcast", "abandon", "--reason", "x"}, "want ID, got 0"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := ctl(t, fc, tc.args...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d (stderr %q)", code, exitUsage, errs)
			}
			if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "coordctl: ") {
				t.Fatalf("stderr %q: want one line starting with \"coordctl: \"", errs)
			}
			if !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr %q does not mention %q", errs, tc.want)
			}
			if out != "" {
				t.Fatalf("stdout %q, want nothing", out)
			}
		})
	}
	for _, m := range broadcastMethods {
		if n := fc.Nodes[0].Calls(m); n != 0 {
			t.Errorf("%s reached the server %d times", m, n)
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBroadcastParse: well-formed broadcast command lines parse, and name
// the request and whether it changes the cluster.
func TestBroadcastParse(t *testing.T) {
	cfgHex := hex.EncodeToString(mustMarshal(t, &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{
		{ClusterId: "by-dev", Pchannels: []string{"by-dev-rootcoord-dml_0"}}}}))
	for _, tc := range []struct {
		args    []string
		what    string
		mutates bool
	}{
		{[]string{"broadcast", "send", "CreateCollection", "--collection-id", "42", "--shards", "2"}, "broadcast send", true},
		{[]string{"broadcast", "send", "DropCollection", "--collection-id=42", "-o", "json"}, "broadcast send", true},
		{[]string{"broadcast", "send", "CreateCollection", "--payload-hex", hex.EncodeToString(client.CreateCollectionPayload(1, 1))}, "broadcast send", true},
		{[]string{"broadcast", "send", "AlterReplicateConfig", "--payload-hex", cfgHex, "--key", "CLUSTER"}, "broadcast send", true},
		{[]string{"broadcast", "send", "FlushAll"}, "broadcast send", true},
		{[]string{"broadcast", "send", "--ack-sync-up", "Custom_1", "--payload-hex", "00ff", "--vchannel", "dml_0_vcchan", "--vchannel", "dml_1_5v0"}, "broadcast send", true},
		{[]string{"broadcast", "send", "Custom", "--key", "collection_name:db:c", "--key", "DB_NAME:db:shared", "--key", "CLUSTER::shared"}, "broadcast send", true},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "cluster::k:with:colons", "--timeout", "30s"}, "broadcast send", true},
		{[]string{"broadcast", "send", "Custom", "--idempotency", "COLLECTION:9:k"}, "broadcast send", true},
		{[]string{"broadcast", "get", "18446744073709551615"}, "broadcast get", false},
		{[]string{"broadcast", "list"}, "broadcast list", false},
		{[]string{"broadcast", "list", "--pending", "--limit", "10000"}, "broadcast list", false},
		{[]string{"broadcast", "retry", "7"}, "broadcast retry", true},
		{[]string{"broadcast", "abandon", "--reason", "node gone", "7"}, "broadcast abandon", true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			inv, err := parse(tc.args, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if inv.act.what != tc.what || inv.act.mutates != tc.mutates {
				t.Fatalf("what %q mutates %v; want %q %v", inv.act.what, inv.act.mutates, tc.what, tc.mutates)
			}
		})
	}
}

func TestParseResourceKey(t *testing.T) {
	for in, want := range map[string]*coordpb.ResourceKey{
		"CLUSTER":                              {Domain: "CLUSTER"},
		"cluster:shared":                       {Domain: "CLUSTER", Shared: true},
		"CLUSTER::shared":                      {Domain: "CLUSTER", Shared: true},
		"DB_NAME:db1":                          {Domain: "DB_NAME", Key: "db1"},
		"DB_NAME:db1:shared":                   {Domain: "DB_NAME", Key: "db1", Shared: true},
		"COLLECTION_NAME:db1:c1":               {Domain: "COLLECTION_NAME", Key: "db1:c1"},
		"COLLECTION_NAME:db1:c1:shared":        {Domain: "COLLECTION_NAME", Key: "db1:c1", Shared: true},
		"COLLECTION_NAME:db1:shared:exclusive": {Domain: "COLLECTION_NAME", Key: "db1:shared"},
		"snapshot_name:42:snap":                {Domain: "SNAPSHOT_NAME", Key: "42:snap"},
	} {
		got, err := parseResourceKey(in)
		if err != nil || !proto.Equal(got, want) {
			t.Errorf("parseResourceKey(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func broadcastFake(t *testing.T) *clienttest.Cluster {
	t.Helper()
	fc := sampleCluster(t, 1)
	fc.SetBroadcasts(clienttest.SampleBroadcasts()...)
	return fc
}

// TestBroadcastSendRequest: the flags become exactly the request sent.
func TestBroadcastSendRequest(t *testing.T) {
	fc := broadcastFake(t)
	code, _, errs := ctl(t, fc, "broadcast", "send", "CreateCollection", "--collection-id", "42", "--shards", "2",
		"--key", "collection_name:db1:c1", "--key", "DB_NAME:db1:shared", "--ack-sync-up", "--idempotency", "collection:42:create:v1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, _, errs = ctl(t, fc, "broadcast", "send", "Custom_Event", "--payload-hex", "00ff10",
		"--vchannel", "by-dev-rootcoord-dml_1", "--vchannel", "by-dev-rootcoord-dml_0_vcchan")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	reqs := fc.BroadcastRequests()
	for i, r := range reqs {
		// The SDK names every call with a request ID of its own.
		if len(r.RequestId) != 32 {
			t.Errorf("request %d: request ID %q, want 32 hex digits", i, r.RequestId)
		}
		r.RequestId = ""
	}
	want := []*coordpb.BroadcastRequest{
		{MessageType: "CreateCollection", Payload: client.CreateCollectionPayload(42, 2),
			ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: "db1:c1"}, {Domain: "DB_NAME", Key: "db1", Shared: true}},
			AckSyncUp:    true, IdempotencyKey: &coordpb.IdempotencyKey{Scope: "COLLECTION", ScopeId: 42, Key: "create:v1"}},
		{MessageType: "Custom_Event", Payload: []byte{0x00, 0xff, 0x10},
			Vchannels: []string{"by-dev-rootcoord-dml_1", "by-dev-rootcoord-dml_0_vcchan"}},
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d", len(reqs), len(want))
	}
	for i := range want {
		if !proto.Equal(reqs[i], want[i]) {
			t.Errorf("request %d:\n got %v\nwant %v", i, reqs[i], want[i])
		}
	}
}

func TestBroadcastSendJSON(t *testing.T) {
	fc := broadcastFake(t)
	fc.ScriptBroadcast(clienttest.BroadcastScript{Resp: &coordpb.BroadcastResponse{BroadcastId: 1 << 62, Duplicated: true, LockWaitMs: 1500,
		AppendResults: []*coordpb.Checkpoint{{Vchannel: "by-dev-rootcoord-dml_0_vcchan", Term: 4, Offset: 1<<63 + 1, TimeTick: 1 << 60}}}})
	code, out, errs := ctl(t, fc, "broadcast", "send", "FlushAll", "-o", "json", "--idempotency", "CLUSTER:0:flush")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var strict struct {
		BroadcastID   uint64 `json:"broadcast_id"`
		Duplicated    bool   `json:"duplicated"`
		LockWaitMs    int64  `json:"lock_wait_ms"`
		AppendResults []struct {
			VChannel string `json:"vchannel"`
			Term     int64  `json:"term"`
			Offset   uint64 `json:"offset"`
			TimeTick uint64 `json:"time_tick"`
		} `json:"append_results"`
	}
	strictDecode(t, out, &strict)
	if strict.BroadcastID != 1<<62 || !strict.Duplicated || strict.LockWaitMs != 1500 || len(strict.AppendResults) != 1 ||
		strict.AppendResults[0].Offset != 1<<63+1 || strict.AppendResults[0].TimeTick != 1<<60 || strict.AppendResults[0].Term != 4 ||
		strict.AppendResults[0].VChannel != "by-dev-rootcoord-dml_0_vcchan" {
		t.Fatalf("decoded %+v from %s", strict, out)
	}
	// Numbers are JSON numbers, exact.
	if !strings.Contains(out, `"offset": 9223372036854775809`) || !strings.Contains(out, `"broadcast_id": 4611686018427387904`) {
		t.Fatalf("numbers not exact: %s", out)
	}

	// Unscripted: the fake broadcasts to every pchannel with the CChannel
	// for its own; an empty result list is [] not null.
	code, out, errs = ctl(t, fc, "broadcast", "send", "FlushAll", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	m := decode(t, out)
	if m["duplicated"] != false || len(m["append_results"].([]any)) != 3 {
		t.Fatalf("send: %s", out)
	}
	wantNumber(t, m, "broadcast_id", 10)
	fc.ScriptBroadcast(clienttest.BroadcastScript{Resp: &coordpb.BroadcastResponse{BroadcastId: 5}})
	if _, out, _ = ctl(t, fc, "broadcast", "send", "X", "-o", "json"); !strings.Contains(out, `"append_results": []`) {
		t.Fatalf("empty results: %s", out)
	}
}

func TestBroadcastSendTable(t *testing.T) {
	fc := broadcastFake(t)
	fc.ScriptBroadcast(clienttest.BroadcastScript{Resp: &coordpb.BroadcastResponse{BroadcastId: 12, LockWaitMs: 250,
		AppendResults: []*coordpb.Checkpoint{{Vchannel: "by-dev-rootcoord-dml_0_vcchan", Term: 4, Offset: 100, TimeTick: 5000},
			{Vchannel: "by-dev-rootcoord-dml_0_42v0", Term: 4, Offset: 101, TimeTick: 5001}}}},
		clienttest.BroadcastScript{Resp: &coordpb.BroadcastResponse{BroadcastId: 12, Duplicated: true}})
	code, out, errs := ctl(t, fc, "broadcast", "send", "CreateCollection", "--collection-id", "42", "--shards", "1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	if lines[0] != "Broadcast 12 (CreateCollection) done on 2 channel(s); waited 250ms for resource keys." {
		t.Fatalf("summary %q", lines[0])
	}
	if got := strings.Join(strings.Fields(lines[2]), " "); got != "VCHANNEL TERM OFFSET TIME TICK" {
		t.Fatalf("header %q", got)
	}
	if got := strings.Join(strings.Fields(lines[4]), " "); got != "by-dev-rootcoord-dml_0_42v0 4 101 5001" {
		t.Fatalf("row %q", got)
	}
	_, out, _ = ctl(t, fc, "broadcast", "send", "CreateCollection", "--collection-id", "42", "--shards", "1", "--idempotency", "COLLECTION:42:c")
	if !strings.HasPrefix(out, "Broadcast 12 (CreateCollection) was sent before with this idempotency key") {
		t.Fatalf("duplicate: %s", out)
	}
}

// TestBroadcastSendErrors: a failed send exits 1 with the server's message
// in one line; an unknown outcome warns that it may have been applied.
func TestBroadcastSendErrors(t *testing.T) {
	fc := broadcastFake(t)
	fc.ScriptBroadcast(clienttest.BroadcastScript{Err: status.Error(codes.FailedPrecondition, "cluster is not primary, cannot do any DDL/DCL")})
	code, out, errs := ctl(t, fc, "broadcast", "send", "DropCollection", "--collection-id", "5")
	if code != exitFail || out != "" || errs != "coordctl: broadcast send: cluster is not primary, cannot do any DDL/DCL\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
	}
	// A lock wait that outlived the deadline: the server names the key.
	lockErr := status.Error(codes.DeadlineExceeded, "waited 2s for resource key CollectionName:db1:c1@X: context deadline exceeded")
	// Answered so on every attempt the SDK makes (it resends a lock wait
	// with the call's request ID).
	var waits []clienttest.BroadcastScript
	for range 64 {
		waits = append(waits, clienttest.BroadcastScript{Err: lockErr})
	}
	fc.ScriptBroadcast(waits...)
	// Whether the SDK's retries end first (the last answer is the lock
	// wait) or the call's deadline cuts an attempt short (the answer
	// before it is named), the key is in the one line.
	code, _, errs = ctl(t, fc, "broadcast", "send", "DropCollection", "--collection-id", "5")
	if code != exitFail || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "coordctl: broadcast send: ") ||
		!strings.Contains(errs, "waited 2s for resource key CollectionName:db1:c1@X") {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
	// The deadline cuts the second attempt short: the first's answer is
	// still named, after the deadline.
	fc = broadcastFake(t)
	fc.ScriptBroadcast(clienttest.BroadcastScript{Err: lockErr}, clienttest.BroadcastScript{Hang: true})
	code, _, errs = ctl(t, fc, "broadcast", "send", "DropCollection", "--collection-id", "5")
	if code != exitFail || strings.Count(errs, "\n") != 1 ||
		!strings.HasPrefix(errs, "coordctl: broadcast send: context deadline exceeded (gave up after 2 attempts); the answer before that: waited 2s for resource key CollectionName:db1:c1@X") {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
	// Every attempt's answer lost: the SDK resends (the request ID makes a
	// resend find the first task) until its retries run out, and the
	// outcome stays unknown. (A new fake: the lock waits scripted above
	// that the SDK did not use must not answer this call.)
	fc = broadcastFake(t)
	var unknown []clienttest.BroadcastScript
	for range 64 {
		unknown = append(unknown, clienttest.BroadcastScript{Apply: true, OutcomeUnknown: true})
	}
	fc.ScriptBroadcast(unknown...)
	code, _, errs = ctl(t, fc, "broadcast", "send", "Custom")
	if code != exitFail || !strings.Contains(errs, "the change may have been applied") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
}

func TestBroadcastGetJSON(t *testing.T) {
	fc := broadcastFake(t)
	code, out, errs := ctl(t, fc, "broadcast", "get", "7", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var strict broadcastInfoStrict
	strictDecode(t, out, &strict)
	m := decode(t, out)
	for k, want := range map[string]any{"message_type": "CreateCollection", "state": "TOMBSTONE", "idempotency_key": "coll/42/6:create",
		"last_error": "", "abandoned_reason": "", "ack_sync_up": false} {
		if m[k] != want {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	wantNumber(t, m, "broadcast_id", 7)
	wantNumber(t, m, "created_unix_ms", 1_700_000_000_000)
	wantNumber(t, m, "tombstoned_unix_ms", 1_700_000_000_250)
	wantNumber(t, m, "callback_attempts", 1)
	wantNumber(t, m, "payload_bytes", 4)
	acked := m["acked"].([]any)
	if len(acked) != 3 {
		t.Fatalf("acked %v", acked)
	}
	wantNumber(t, acked[0].(map[string]any), "time_tick", 1<<60)
	keys := m["resource_keys"].([]any)
	if k := keys[1].(map[string]any); len(keys) != 2 || k["domain"] != "COLLECTION_NAME" || k["key"] != "db1:c1" || k["shared"] != false {
		t.Fatalf("resource_keys %v", keys)
	}

	// A pending task with callback failures; an abandoned one.
	_, out, _ = ctl(t, fc, "broadcast", "get", "8", "-o", "json")
	m = decode(t, out)
	if m["state"] != "PENDING" || m["last_error"] != "collection 43: vchannels are in use" {
		t.Fatalf("task 8: %s", out)
	}
	wantNumber(t, m, "callback_attempts", 2)
	wantNumber(t, m, "tombstoned_unix_ms", 0)
	_, out, _ = ctl(t, fc, "broadcast", "get", "9", "-o", "json")
	if m = decode(t, out); m["abandoned_reason"] != "streaming node gone" || len(m["acked"].([]any)) != 0 {
		t.Fatalf("task 9: %s", out)
	}

	code, out, errs = ctl(t, fc, "broadcast", "get", "99")
	if code != exitFail || out != "" || !strings.HasPrefix(errs, "coordctl: broadcast get: broadcast 99 is unknown") {
		t.Fatalf("unknown: exit %d stdout %q stderr %q", code, out, errs)
	}
}

// broadcastInfoStrict is exactly the documented BroadcastInfo JSON.
type broadcastInfoStrict struct {
	BroadcastID  uint64 `json:"broadcast_id"`
	MessageType  string `json:"message_type"`
	State        string `json:"state"`
	ResourceKeys []struct {
		Domain string `json:"domain"`
		Key    string `json:"key"`
		Shared bool   `json:"shared"`
	} `json:"resource_keys"`
	VChannels []string `json:"vchannels"`
	Acked     []struct {
		VChannel string `json:"vchannel"`
		Term     int64  `json:"term"`
		Offset   uint64 `json:"offset"`
		TimeTick uint64 `json:"time_tick"`
	} `json:"acked"`
	AckSyncUp        bool   `json:"ack_sync_up"`
	IdempotencyKey   string `json:"idempotency_key"`
	CreatedUnixMs    int64  `json:"created_unix_ms"`
	TombstonedUnixMs int64  `json:"tombstoned_unix_ms"`
	CallbackAttempts uint32 `json:"callback_attempts"`
	LastError        string `json:"last_error"`
	AbandonedReason  string `json:"abandoned_reason"`
	PayloadBytes     uint32 `json:"payload_bytes"`
}

func TestBroadcastGetTable(t *testing.T) {
	fc := broadcastFake(t)
	code, out, errs := ctl(t, fc, "broadcast", "get", "8")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"Broadcast 8 (DropCollection): PENDING.",
		"Created            2023-11-14T22:13:21.000Z",
		"Tombstoned         -",
		"Resource keys      CLUSTER (shared), COLLECTION_NAME:db1:c2",
		"Acked              1 of 2 target(s)",
		"Callback attempts  2",
		"Last error         collection 43: vchannels are in use",
		"Abandoned reason   -",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no line %q in\n%s", want, out)
		}
	}
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "TARGET" || strings.HasPrefix(f[0], "by-dev")) {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	want := []string{"TARGET ACKED TERM OFFSET TIME TICK", "by-dev-rootcoord-dml_0_vcchan yes 4 13 1152921504606846979", "by-dev-rootcoord-dml_1_43v0 no - - -"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Fatalf("target rows %q, want %q", rows, want)
	}
}

func TestBroadcastListJSON(t *testing.T) {
	fc := broadcastFake(t)
	code, out, errs := ctl(t, fc, "broadcast", "list", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var strict struct {
		Broadcasts []broadcastInfoStrict `json:"broadcasts"`
	}
	strictDecode(t, out, &strict)
	if len(strict.Broadcasts) != 3 || strict.Broadcasts[0].BroadcastID != 7 || strict.Broadcasts[2].AbandonedReason != "streaming node gone" {
		t.Fatalf("list: %s", out)
	}
	_, out, _ = ctl(t, fc, "broadcast", "list", "--pending", "-o", "json")
	bs := decode(t, out)["broadcasts"].([]any)
	if len(bs) != 1 {
		t.Fatalf("--pending: %s", out)
	}
	wantNumber(t, bs[0].(map[string]any), "broadcast_id", 8)
	_, out, _ = ctl(t, fc, "broadcast", "list", "--limit", "1", "-o", "json")
	bs = decode(t, out)["broadcasts"].([]any)
	if len(bs) != 1 {
		t.Fatalf("--limit 1: %s", out)
	}
	wantNumber(t, bs[0].(map[string]any), "broadcast_id", 9)

	fc.SetBroadcasts()
	if _, out, _ = ctl(t, fc, "broadcast", "list", "-o", "json"); !strings.Contains(out, `"broadcasts": []`) {
		t.Fatalf("empty list: %s", out)
	}
}

func TestBroadcastListTable(t *testing.T) {
	fc := broadcastFake(t)
	code, out, errs := ctl(t, fc, "broadcast", "list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		"ID TYPE STATE ACKED ATTEMPTS CREATED NOTE",
		"7 CreateCollection TOMBSTONE 3/3 1 2023-11-14T22:13:20.000Z -",
		"8 DropCollection PENDING 1/2 2 2023-11-14T22:13:21.000Z last error: collection 43: vchannels are in use",
		"9 RenameAlias TOMBSTONE 0/1 0 2023-11-14T22:13:22.000Z abandoned: streaming node gone",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i := range want {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != want[i] {
			t.Errorf("line %d = %q, want %q", i, got, want[i])
		}
	}
}

func TestBroadcastRetryAbandon(t *testing.T) {
	fc := broadcastFake(t)
	code, out, errs := ctl(t, fc, "broadcast", "retry", "8")
	if code != exitOK || !strings.HasPrefix(out, "Retry of broadcast 8 requested") {
		t.Fatalf("retry: exit %d %q %q", code, out, errs)
	}
	if _, out, _ = ctl(t, fc, "broadcast", "retry", "8", "-o", "json"); strings.Join(strings.Fields(out), " ") != `{ "broadcast_id": 8, "retried": true }` {
		t.Fatalf("retry JSON: %s", out)
	}
	if got := fc.Retries(); len(got) != 2 || got[0] != 8 {
		t.Fatalf("retries %v", got)
	}
	code, out, errs = ctl(t, fc, "broadcast", "retry", "7")
	if code != exitFail || out != "" || errs != "coordctl: broadcast retry: broadcast 7 is already finished\n" {
		t.Fatalf("retry finished: exit %d %q %q", code, out, errs)
	}
	code, _, errs = ctl(t, fc, "broadcast", "retry", "99")
	if code != exitFail || errs != "coordctl: broadcast retry: broadcast 99 is unknown\n" {
		t.Fatalf("retry unknown: exit %d %q", code, errs)
	}

	code, out, errs = ctl(t, fc, "broadcast", "abandon", "8", "--reason", "collection 43 is\nstuck", "-o", "json")
	if code != exitOK {
		t.Fatalf("abandon: exit %d %q", code, errs)
	}
	var strict struct {
		BroadcastID uint64 `json:"broadcast_id"`
		Abandoned   bool   `json:"abandoned"`
		Reason      string `json:"reason"`
	}
	strictDecode(t, out, &strict)
	if strict.BroadcastID != 8 || !strict.Abandoned || strict.Reason != "collection 43 is\nstuck" {
		t.Fatalf("abandon JSON %s", out)
	}
	if b := fc.Broadcasts()[1]; b.State != "TOMBSTONE" || b.AbandonedReason != "collection 43 is\nstuck" {
		t.Fatalf("task after abandon %v", b)
	}
	code, _, errs = ctl(t, fc, "broadcast", "abandon", "8", "--reason", "again")
	if code != exitFail || errs != "coordctl: broadcast abandon: broadcast 8 is already finished\n" {
		t.Fatalf("abandon finished: exit %d %q", code, errs)
	}
	fc.SetBroadcasts(clienttest.SampleBroadcasts()...)
	if code, out, _ = ctl(t, fc, "broadcast", "abandon", "8", "--reason", "x"); code != exitOK ||
		out != "Abandoned broadcast 8: its callback will not run and its resource keys are released.\n" {
		t.Fatalf("abandon table: %d %q", code, out)
	}
}

// TestBroadcastHelp: the group is listed and documented.
func TestBroadcastHelp(t *testing.T) {
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"help"}, &out, &errb, noEnv); code != exitOK || !strings.Contains(out.String(), "broadcast abandon ID") {
		t.Fatalf("help: %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"broadcast", "send", "--help"}, &out, &errb, noEnv); code != exitOK ||
		!strings.Contains(out.String(), "--idempotency SCOPE:ID:KEY") || !strings.Contains(out.String(), "--key DOMAIN:KEY[:shared]") {
		t.Fatalf("send --help: %d\n%s", code, out.String())
	}
}
