package client_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/client/clienttest"
	"github.com/coordd/coordd/vocab"
)

func broadcastCluster(t *testing.T) (*clienttest.Cluster, *client.Client) {
	t.Helper()
	fc := clienttest.Start(t, 1)
	fc.SetChannelState(clienttest.SampleChannelState())
	return fc, newClient(t, client.Config{Endpoints: fc.Endpoints()})
}

func TestBroadcastPayloads(t *testing.T) {
	var cp coordpb.CreateCollectionPayload
	if err := proto.Unmarshal(client.CreateCollectionPayload(42, 3), &cp); err != nil || cp.CollectionId != 42 || cp.Shards != 3 {
		t.Fatalf("CreateCollectionPayload decodes to %v (%v)", &cp, err)
	}
	var dp coordpb.DropCollectionPayload
	if err := proto.Unmarshal(client.DropCollectionPayload(42), &dp); err != nil || dp.CollectionId != 42 {
		t.Fatalf("DropCollectionPayload decodes to %v (%v)", &dp, err)
	}
}

// TestBroadcastSpecValidateWithoutTargets: a spec with no VChannels (coordd
// chooses the targets) is checked locally by the shared shape rule, with
// no invented target and no log-schema wording in the error.
func TestBroadcastSpecValidateWithoutTargets(t *testing.T) {
	bad := client.BroadcastSpec{MessageType: vocab.MsgFlushAll, ResourceKeys: []*coordpb.ResourceKey{{Domain: "CLUSTER", Key: "c"}}}
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "CLUSTER takes no key") {
		t.Fatalf("Validate() = %v, want the CLUSTER key refused", err)
	}
	if strings.Contains(err.Error(), "invalid command") || strings.Contains(err.Error(), "_0") {
		t.Errorf("error %q speaks of log commands or an invented target", err)
	}
	unknown := client.BroadcastSpec{MessageType: "AlterCollection", ResourceKeys: []*coordpb.ResourceKey{{Domain: "TABLE", Key: "t"}}}
	if err := unknown.Validate(); err == nil || !strings.Contains(err.Error(), `unknown resource key domain "TABLE"`) {
		t.Fatalf("Validate() = %v, want the TABLE domain refused", err)
	}
	good := client.BroadcastSpec{MessageType: vocab.MsgCreateCollection, Payload: client.CreateCollectionPayload(42, 2),
		ResourceKeys: []*coordpb.ResourceKey{{Domain: "collection_name", Key: "db1:c1"}},
		Idempotency:  &client.IdempotencyKey{Scope: client.ScopeDatabase, ScopeID: 1, Key: "create-c1"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate() of a valid spec without VChannels = %v", err)
	}
}

func TestBroadcastSendsSpec(t *testing.T) {
	fc, c := broadcastCluster(t)
	ctx := context.Background()
	keys := []*coordpb.ResourceKey{{Domain: "collection_name", Key: "db1:c1"}, {Domain: "DB_NAME", Key: "db1", Shared: true}}
	resp, err := c.Broadcast(ctx, client.BroadcastSpec{
		MessageType: vocab.MsgCreateCollection, Payload: client.CreateCollectionPayload(42, 2), ResourceKeys: keys,
		AckSyncUp: true, Idempotency: &client.IdempotencyKey{Scope: "collection", ScopeID: 42, Key: "create"}, RequestID: "create-42",
	})
	if err != nil {
		t.Fatal(err)
	}
	reqs := fc.BroadcastRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d Broadcast requests, want 1", len(reqs))
	}
	want := &coordpb.BroadcastRequest{MessageType: vocab.MsgCreateCollection, Payload: client.CreateCollectionPayload(42, 2),
		ResourceKeys: keys, AckSyncUp: true, IdempotencyKey: &coordpb.IdempotencyKey{Scope: "COLLECTION", ScopeId: 42, Key: "create"},
		RequestId: "create-42"}
	if !proto.Equal(reqs[0], want) {
		t.Fatalf("request %v\nwant    %v", reqs[0], want)
	}
	// The fake allocated the collection's two vchannels and added the CChannel.
	if resp.BroadcastId == 0 || resp.Duplicated || len(resp.AppendResults) != 3 {
		t.Fatalf("response %v", resp)
	}
	// Same idempotency key: the same task, duplicated.
	again, err := c.Broadcast(ctx, client.BroadcastSpec{MessageType: vocab.MsgCreateCollection, Payload: client.CreateCollectionPayload(42, 2),
		Idempotency: &client.IdempotencyKey{Scope: client.ScopeCollection, ScopeID: 42, Key: "create"}})
	if err != nil || again.BroadcastId != resp.BroadcastId || !again.Duplicated {
		t.Fatalf("repeat = %v, %v; want broadcast %d duplicated", again, err, resp.BroadcastId)
	}
}

// TestBroadcastBadSpec: a spec the server would refuse is refused locally,
// as InvalidArgument, with nothing sent.
func TestBroadcastBadSpec(t *testing.T) {
	fc, c := broadcastCluster(t)
	ctx := context.Background()
	tooMany := make([]*coordpb.ResourceKey, vocab.MaxResourceKeys+1)
	for i := range tooMany {
		tooMany[i] = &coordpb.ResourceKey{Domain: "DB_NAME", Key: strings.Repeat("d", i+1)}
	}
	for _, tc := range []struct {
		name string
		spec client.BroadcastSpec
		want string
	}{
		{"empty type", client.BroadcastSpec{}, "message type"},
		{"bad type", client.BroadcastSpec{MessageType: "Create-Collection"}, "not allowed"},
		{"unknown domain", client.BroadcastSpec{MessageType: "X", ResourceKeys: []*coordpb.ResourceKey{{Domain: "TABLE", Key: "t"}}}, `unknown resource key domain "TABLE"`},
		{"cluster key with text", client.BroadcastSpec{MessageType: "X", ResourceKeys: []*coordpb.ResourceKey{{Domain: "CLUSTER", Key: "c"}}}, "takes no key"},
		{"db key without text", client.BroadcastSpec{MessageType: "X", ResourceKeys: []*coordpb.ResourceKey{{Domain: "DB_NAME"}}}, "needs a key"},
		{"too many keys", client.BroadcastSpec{MessageType: "X", ResourceKeys: tooMany}, "65 resource keys"},
		{"bad target", client.BroadcastSpec{MessageType: "X", VChannels: []string{"nope"}}, "nope"},
		{"twice", client.BroadcastSpec{MessageType: "X", VChannels: []string{"dml_0", "dml_0"}}, "listed twice"},
		{"bad scope", client.BroadcastSpec{MessageType: "X", Idempotency: &client.IdempotencyKey{Scope: "TENANT", Key: "k"}}, "idempotency scope"},
		{"cluster scope id", client.BroadcastSpec{MessageType: "X", Idempotency: &client.IdempotencyKey{Scope: "CLUSTER", ScopeID: 3, Key: "k"}}, "scope id 0"},
		{"database scope id 0", client.BroadcastSpec{MessageType: "X", Idempotency: &client.IdempotencyKey{Scope: "DATABASE", Key: "k"}}, "database id must be positive"},
		{"empty key", client.BroadcastSpec{MessageType: "X", Idempotency: &client.IdempotencyKey{Scope: "CLUSTER"}}, "idempotency key must be 1..256"},
		{"unprintable key", client.BroadcastSpec{MessageType: "X", Idempotency: &client.IdempotencyKey{Scope: "CLUSTER", Key: "a\tb"}}, "printable"},
		{"payload too large", client.BroadcastSpec{MessageType: "X", Payload: make([]byte, vocab.MaxBroadcastPayload+1)}, "payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Broadcast(ctx, tc.spec)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want InvalidArgument mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "invalid argument: ") {
				t.Errorf("err %q repeats the code", err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"ack id 0", func() error {
			return c.Ack(ctx, 0, 1, 1, []*coordpb.Checkpoint{{Vchannel: "dml_0", Term: 1, TimeTick: 1}})
		}},
		{"ack no checkpoints", func() error { return c.Ack(ctx, 1, 1, 1, nil) }},
		{"ack term 0", func() error { return c.Ack(ctx, 1, 1, 1, []*coordpb.Checkpoint{{Vchannel: "dml_0", TimeTick: 1}}) }},
		{"ack without node", func() error {
			return c.Ack(ctx, 1, 0, 1, []*coordpb.Checkpoint{{Vchannel: "dml_0", Term: 1, TimeTick: 1}})
		}},
		{"ack without epoch", func() error {
			return c.Ack(ctx, 1, 1, 0, []*coordpb.Checkpoint{{Vchannel: "dml_0", Term: 1, TimeTick: 1}})
		}},
		{"get 0", func() error { _, err := c.GetBroadcast(ctx, 0); return err }},
		{"list limit", func() error { _, err := c.ListBroadcasts(ctx, false, client.MaxListBroadcasts+1); return err }},
		{"retry 0", func() error { return c.RetryBroadcast(ctx, 0) }},
		{"abandon 0", func() error { return c.AbandonBroadcast(ctx, 0, "r") }},
		{"abandon no reason", func() error { return c.AbandonBroadcast(ctx, 5, "") }},
		{"abandon long reason", func() error { return c.AbandonBroadcast(ctx, 5, strings.Repeat("r", vocab.MaxReasonBytes+1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err = %v; want InvalidArgument", err)
			}
		})
	}
	n := fc.Nodes[0]
	for _, m := range []string{"Broadcast", "Ack", "GetBroadcast", "ListBroadcasts", "RetryBroadcast", "AbandonBroadcast"} {
		if n.Calls(m) != 0 {
			t.Errorf("%s reached the server %d times", m, n.Calls(m))
		}
	}
}

// TestBroadcastCutByTheDeadlineIsAnUnknownOutcome: the one attempt of a
// broadcast reached the server and was still waiting when the call's
// deadline passed: it may have been applied, so the error says the
// outcome is unknown, with the deadline as its code.
func TestBroadcastCutByTheDeadlineIsAnUnknownOutcome(t *testing.T) {
	fc, c := broadcastCluster(t)
	fc.ScriptBroadcast(clienttest.BroadcastScript{Apply: true, Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Broadcast(ctx, client.BroadcastSpec{MessageType: vocab.MsgFlushAll})
	if !client.IsOutcomeUnknown(err) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v; want DeadlineExceeded with an unknown outcome", err)
	}
}

// TestBroadcastRetries: every Broadcast call carries one request ID on all
// its attempts, so it is resent through unknown outcomes and the server
// answers the resends with the first task (docs/semantics.md#client-retries);
// an idempotency key does the same across calls.
func TestBroadcastRetries(t *testing.T) {
	ctx := context.Background()
	t.Run("idempotent", func(t *testing.T) {
		fc, c := broadcastCluster(t)
		// Each of the first three attempts creates (or finds) the task and
		// then loses the answer.
		fc.ScriptBroadcast(clienttest.BroadcastScript{Apply: true, OutcomeUnknown: true},
			clienttest.BroadcastScript{Apply: true, OutcomeUnknown: true}, clienttest.BroadcastScript{Apply: true, OutcomeUnknown: true})
		resp, err := c.Broadcast(ctx, client.BroadcastSpec{MessageType: vocab.MsgFlushAll,
			Idempotency: &client.IdempotencyKey{Scope: "CLUSTER", Key: "flush-1"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := fc.Nodes[0].Calls("Broadcast"); got != 4 {
			t.Fatalf("Broadcast reached the server %d times, want 4", got)
		}
		if !resp.Duplicated || len(fc.Broadcasts()) != 1 || fc.Broadcasts()[0].BroadcastId != resp.BroadcastId {
			t.Fatalf("response %v; tasks %v; want the one task, duplicated", resp, fc.Broadcasts())
		}
	})
	t.Run("without an idempotency key, outcome unknown: resent under one request ID", func(t *testing.T) {
		fc, c := broadcastCluster(t)
		fc.ScriptBroadcast(clienttest.BroadcastScript{Apply: true, OutcomeUnknown: true},
			clienttest.BroadcastScript{Apply: true, OutcomeUnknown: true}, clienttest.BroadcastScript{Apply: true, OutcomeUnknown: true})
		resp, err := c.Broadcast(ctx, client.BroadcastSpec{MessageType: vocab.MsgFlushAll})
		if err != nil {
			t.Fatal(err)
		}
		reqs := fc.BroadcastRequests()
		if len(reqs) != 4 || reqs[0].RequestId == "" {
			t.Fatalf("%d attempts, the first with request ID %q; want 4 attempts carrying one", len(reqs), reqs[0].GetRequestId())
		}
		for _, r := range reqs[1:] {
			if r.RequestId != reqs[0].RequestId {
				t.Fatalf("a retry carried request ID %q, the first attempt %q: a resend could make a second task", r.RequestId, reqs[0].RequestId)
			}
		}
		if n := len(fc.Broadcasts()); n != 1 || !resp.Duplicated {
			t.Fatalf("%d tasks, response %v; want the one task, duplicated", n, resp)
		}
	})
	t.Run("calls get their own request IDs", func(t *testing.T) {
		fc, c := broadcastCluster(t)
		for range 2 {
			if _, err := c.Broadcast(ctx, client.BroadcastSpec{MessageType: vocab.MsgFlushAll}); err != nil {
				t.Fatal(err)
			}
		}
		if reqs := fc.BroadcastRequests(); len(reqs) != 2 || reqs[0].RequestId == reqs[1].RequestId || len(fc.Broadcasts()) != 2 {
			t.Fatalf("two calls sent %v and made %d tasks; want two request IDs, two tasks", reqs, len(fc.Broadcasts()))
		}
	})
	t.Run("not idempotent, nothing done: retried", func(t *testing.T) {
		fc, c := broadcastCluster(t)
		fc.Nodes[0].SetHook(func(ctx context.Context, method string, call int) error {
			if call == 1 {
				return unavailable(ctx, method, call) // coordd-outcome: none
			}
			return nil
		})
		if _, err := c.Broadcast(ctx, client.BroadcastSpec{MessageType: vocab.MsgFlushAll}); err != nil {
			t.Fatal(err)
		}
		if got, n := fc.Nodes[0].Calls("Broadcast"), len(fc.Broadcasts()); got != 2 || n != 1 {
			t.Fatalf("Broadcast reached the server %d times and made %d tasks; want 2 calls, one task", got, n)
		}
	})
	t.Run("definitive", func(t *testing.T) {
		fc, c := broadcastCluster(t)
		fc.ScriptBroadcast(clienttest.BroadcastScript{Err: status.Error(codes.FailedPrecondition, "cluster is not primary, cannot do any DDL/DCL")})
		_, err := c.Broadcast(ctx, client.BroadcastSpec{MessageType: "X", Idempotency: &client.IdempotencyKey{Scope: "CLUSTER", Key: "k"}})
		if status.Code(err) != codes.FailedPrecondition || fc.Nodes[0].Calls("Broadcast") != 1 {
			t.Fatalf("err = %v after %d calls; want FailedPrecondition after 1", err, fc.Nodes[0].Calls("Broadcast"))
		}
	})
}

func TestBroadcastTaskCalls(t *testing.T) {
	fc, c := broadcastCluster(t)
	fc.SetBroadcasts(clienttest.SampleBroadcasts()...)
	ctx := context.Background()

	info, err := c.GetBroadcast(ctx, 8)
	if err != nil || info.State != "PENDING" || info.CallbackAttempts != 2 {
		t.Fatalf("GetBroadcast(8) = %v, %v", info, err)
	}
	if _, err := c.GetBroadcast(ctx, 99); status.Code(err) != codes.NotFound {
		t.Fatalf("GetBroadcast(99): %v; want NotFound", err)
	}
	all, err := c.ListBroadcasts(ctx, false, 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("ListBroadcasts = %d tasks, %v", len(all), err)
	}
	pending, err := c.ListBroadcasts(ctx, true, 0)
	if err != nil || len(pending) != 1 || pending[0].BroadcastId != 8 {
		t.Fatalf("ListBroadcasts(pending) = %v, %v", pending, err)
	}
	newest, err := c.ListBroadcasts(ctx, false, 2)
	if err != nil || len(newest) != 2 || newest[0].BroadcastId != 8 || newest[1].BroadcastId != 9 {
		t.Fatalf("ListBroadcasts(limit 2) = %v, %v", newest, err)
	}

	cp := []*coordpb.Checkpoint{{Vchannel: "by-dev-rootcoord-dml_1_43v0", Term: 2, Offset: 5, TimeTick: 77}}
	if err := c.Ack(ctx, 8, 3, 11, cp); err != nil {
		t.Fatal(err)
	}
	if acks := fc.Acks(); len(acks) != 1 || !proto.Equal(acks[0], &coordpb.AckRequest{BroadcastId: 8, Checkpoints: cp, NodeId: 3, Epoch: 11}) {
		t.Fatalf("acks %v", acks)
	}
	if err := c.RetryBroadcast(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if err := c.RetryBroadcast(ctx, 7); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("RetryBroadcast(finished): %v", err)
	}
	if err := c.RetryBroadcast(ctx, 99); status.Code(err) != codes.NotFound {
		t.Fatalf("RetryBroadcast(unknown): %v", err)
	}
	if got := fc.Retries(); !slices.Equal(got, []uint64{8}) {
		t.Fatalf("retries %v", got)
	}
	if err := c.AbandonBroadcast(ctx, 8, "operator gave up"); err != nil {
		t.Fatal(err)
	}
	if info, _ := c.GetBroadcast(ctx, 8); info.State != "TOMBSTONE" || info.AbandonedReason != "operator gave up" {
		t.Fatalf("after abandon: %v", info)
	}
	if err := c.AbandonBroadcast(ctx, 8, "again"); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second abandon: %v", err)
	}
}
