package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/vocab"
)

// fakeBroadcasts records what the API hands the broadcaster. Broadcast
// answers with answer (default: a result with ID 1); Ack, Retry and
// Abandon with err.
type fakeBroadcasts struct {
	mu       sync.Mutex
	reqs     []broadcaster.Request
	acks     []fakeAck
	retries  []uint64
	abandons []fakeAbandon
	answer   func(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error)
	err      error
}

type fakeAck struct {
	id          uint64
	cps         []*logpb.VChannelCheckpoint
	node, epoch uint64
}

type fakeAbandon struct {
	id     uint64
	reason string
}

func (f *fakeBroadcasts) Broadcast(ctx context.Context, c broadcaster.Checked) (broadcaster.Result, error) {
	req := c.Request()
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	answer := f.answer
	f.mu.Unlock()
	if answer == nil {
		return broadcaster.Result{BroadcastID: 1}, nil
	}
	return answer(ctx, req)
}

func (f *fakeBroadcasts) Ack(_ context.Context, a broadcaster.Ack) error {
	ack := a.Body()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, fakeAck{ack.BroadcastId, ack.Checkpoints, ack.FromNode, ack.FromEpoch})
	return f.err
}

func (f *fakeBroadcasts) Retry(id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retries = append(f.retries, id)
	return f.err
}

func (f *fakeBroadcasts) Abandon(_ context.Context, id uint64, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.abandons = append(f.abandons, fakeAbandon{id, reason})
	return f.err
}

func (f *fakeBroadcasts) setAnswer(a func(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = a
}

func (f *fakeBroadcasts) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeBroadcasts) requests() []broadcaster.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// calls counts every call the fake received.
func (f *fakeBroadcasts) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs) + len(f.acks) + len(f.retries) + len(f.abandons)
}

const (
	bcCluster = "by-dev"
	bcP0      = "by-dev-rootcoord-dml_0"
	bcP1      = "by-dev-rootcoord-dml_1"
	bcP2      = "by-dev-rootcoord-dml_2"
	bcCChan   = bcP0 + vocab.CChannelSuffix
)

// startBroadcastNode starts a node whose broadcaster is a fake, with
// streaming initialized (three PChannels; the CChannel on the first).
func startBroadcastNode(t *testing.T, opts ...Option) (*testNode, *fakeBroadcasts, coordpb.BroadcasterClient) {
	t.Helper()
	fb := &fakeBroadcasts{}
	tn := startTestNodeCfg(t, routines.Config{Doubles: routines.Doubles{Broadcasts: fb}}, opts...)
	mustCommit(t, tn, &logpb.InitStreaming{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1, bcP2}})
	if got := tn.node.State().CChannel(); got != bcCChan {
		t.Fatalf("CChannel %q, want %q", got, bcCChan)
	}
	return tn, fb, coordpb.NewBroadcasterClient(tn.conn)
}

// mustCommit proposes body through the node and fails on any rejection.
func mustCommit(t *testing.T, tn *testNode, body proto.Message) *logpb.Result {
	t.Helper()
	res, err := commands.Propose(callCtx(t), tn.node, body, "")
	if err != nil {
		t.Fatalf("propose %T: %v", body, err)
	}
	if res.Rejection != nil {
		t.Fatalf("propose %T: rejected: %v", body, res.Rejection)
	}
	return res
}

// bcObserved is the state a rejected broadcaster call must leave alone.
type bcObserved struct {
	observed
	Tasks       int
	Collections int
	Version     fsm.AssignmentVersion
	Calls       int
}

func observeBroadcasts(t *testing.T, tn *testNode, fb *fakeBroadcasts) bcObserved {
	t.Helper()
	st := tn.node.State()
	return bcObserved{observed: observe(t, tn.node), Tasks: len(st.BroadcastTasks()), Collections: len(st.Collections()),
		Version: st.AssignmentVersion(), Calls: fb.calls()}
}

// TestBroadcasterBadInput: invalid input to every broadcaster RPC is
// InvalidArgument with a clear message, and changes nothing: no command is
// committed and the broadcaster is not called.
func TestBroadcasterBadInput(t *testing.T) {
	tn, fb, bc := startBroadcastNode(t)
	// A pending task, so that Retry and Abandon have something to refuse
	// for the right reason.
	pending := mustCommit(t, tn, &logpb.CreateBroadcast{MessageType: "AlterCollection", Vchannels: []string{bcCChan}}).GetBroadcast().GetBroadcastId()

	send := func(r *coordpb.BroadcastRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := bc.Broadcast(ctx, r); return err }
	}
	custom := func(mut func(r *coordpb.BroadcastRequest)) func(context.Context) error {
		r := &coordpb.BroadcastRequest{MessageType: "AlterCollection", Vchannels: []string{bcCChan}}
		mut(r)
		return send(r)
	}
	idem := func(scope string, id int64, key string) func(context.Context) error {
		return custom(func(r *coordpb.BroadcastRequest) {
			r.IdempotencyKey = &coordpb.IdempotencyKey{Scope: scope, ScopeId: id, Key: key}
		})
	}
	ack := func(id uint64, cps ...*coordpb.Checkpoint) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := bc.Ack(ctx, &coordpb.AckRequest{BroadcastId: id, Checkpoints: cps, NodeId: 1, Epoch: 1})
			return err
		}
	}
	anonymousAck := func(node, epoch uint64) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := bc.Ack(ctx, &coordpb.AckRequest{BroadcastId: pending, Checkpoints: []*coordpb.Checkpoint{{Vchannel: bcCChan, Term: 1, TimeTick: 1}},
				NodeId: node, Epoch: epoch})
			return err
		}
	}
	abandon := func(id uint64, reason string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := bc.AbandonBroadcast(ctx, &coordpb.AbandonBroadcastRequest{BroadcastId: id, Reason: reason})
			return err
		}
	}
	tooManyKeys := make([]*coordpb.ResourceKey, vocab.MaxResourceKeys+1)
	for i := range tooManyKeys {
		tooManyKeys[i] = &coordpb.ResourceKey{Domain: "DB_NAME", Key: fmt.Sprintf("db%d", i)}
	}
	tooManyTargets := make([]string, vocab.MaxBroadcastTargets+1)
	for i := range tooManyTargets {
		tooManyTargets[i] = vocab.VChannelName(bcP1, int64(i+1), 0)
	}
	ccPayload := func(coll int64, shards uint32) []byte {
		b, _ := proto.Marshal(&logpb.CreateCollectionPayload{CollectionId: coll, Shards: shards})
		return b
	}
	cp := func(v string, term int64, tick uint64) *coordpb.Checkpoint {
		return &coordpb.Checkpoint{Vchannel: v, Term: term, Offset: 1, TimeTick: tick}
	}

	tests := []struct {
		name    string
		call    func(context.Context) error
		message string
	}{
		{"Broadcast/unknown domain", custom(func(r *coordpb.BroadcastRequest) {
			r.ResourceKeys = []*coordpb.ResourceKey{{Domain: "TABLE", Key: "t1"}}
		}), `unknown resource key domain "TABLE"`},
		{"Broadcast/empty domain", custom(func(r *coordpb.BroadcastRequest) { r.ResourceKeys = []*coordpb.ResourceKey{{Key: "x"}} }), `unknown resource key domain ""`},
		{"Broadcast/no message type", custom(func(r *coordpb.BroadcastRequest) { r.MessageType = "" }), "message type must be 1..64 bytes, got 0"},
		{"Broadcast/bad message type", custom(func(r *coordpb.BroadcastRequest) { r.MessageType = "Create Collection" }), `message type "Create Collection"`},
		{"Broadcast/long message type", custom(func(r *coordpb.BroadcastRequest) { r.MessageType = strings.Repeat("M", 65) }), "got 65"},
		{"Broadcast/bad idempotency scope", idem("TENANT", 1, "k"), `idempotency scope must be CLUSTER, DATABASE or COLLECTION, got "TENANT"`},
		{"Broadcast/empty idempotency scope", idem("", 0, "k"), "idempotency scope"},
		{"Broadcast/database scope id 0", idem("DATABASE", 0, "k"), "database id must be positive, got 0"},
		{"Broadcast/collection scope id -1", idem("COLLECTION", -1, "k"), "collection id must be positive, got -1"},
		{"Broadcast/empty idempotency key", idem("CLUSTER", 0, ""), "idempotency key must be 1..256 bytes, got 0"},
		{"Broadcast/long idempotency key", idem("DATABASE", 3, strings.Repeat("k", 257)), "got 257"},
		{"Broadcast/unprintable idempotency key", idem("COLLECTION", 3, "a\x7fb"), "not printable ASCII"},
		{"Broadcast/too many keys", custom(func(r *coordpb.BroadcastRequest) { r.ResourceKeys = tooManyKeys }), "65 resource keys (max 64)"},
		{"Broadcast/cluster key with a key", custom(func(r *coordpb.BroadcastRequest) {
			r.ResourceKeys = []*coordpb.ResourceKey{{Domain: "CLUSTER", Key: "x"}}
		}), "takes no key"},
		{"Broadcast/collection key without a key", custom(func(r *coordpb.BroadcastRequest) {
			r.ResourceKeys = []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME"}}
		}), "needs a key"},
		{"Broadcast/bad target", custom(func(r *coordpb.BroadcastRequest) { r.Vchannels = []string{bcCChan, "not a channel"} }), `"not a channel"`},
		{"Broadcast/bad vchannel", custom(func(r *coordpb.BroadcastRequest) { r.Vchannels = []string{bcP1 + "_01v0"} }), "bad collection id"},
		{"Broadcast/target twice", custom(func(r *coordpb.BroadcastRequest) { r.Vchannels = []string{bcCChan, bcP1, bcP1} }), "listed twice"},
		{"Broadcast/too many targets", custom(func(r *coordpb.BroadcastRequest) { r.Vchannels = tooManyTargets }), "1..4096 target channels, got 4097"},
		{"Broadcast/unknown message type", send(&coordpb.BroadcastRequest{MessageType: "Bogus"}), "\"Bogus\" is not a known broadcast message type"},
		{"Broadcast/payload too large", custom(func(r *coordpb.BroadcastRequest) { r.Payload = make([]byte, vocab.MaxBroadcastPayload+1) }), "payload is 524289 bytes"},
		{"Broadcast/CreateCollection bad payload", send(&coordpb.BroadcastRequest{MessageType: vocab.MsgCreateCollection, Payload: []byte{0xff}}), "CreateCollection payload"},
		{"Broadcast/CreateCollection collection 0", send(&coordpb.BroadcastRequest{MessageType: vocab.MsgCreateCollection, Payload: ccPayload(0, 2)}), "collection id must be positive, got 0"},
		{"Broadcast/CreateCollection 0 shards", send(&coordpb.BroadcastRequest{MessageType: vocab.MsgCreateCollection, Payload: ccPayload(5, 0)}), "shard count must be in 1..1024, got 0"},

		{"Ack/id 0", ack(0, cp(bcCChan, 1, 1)), "ack needs a broadcast id"},
		{"Ack/no checkpoints", ack(pending), "ack needs a broadcast id and 1..4096 checkpoints"},
		{"Ack/bad vchannel", ack(pending, cp("nope", 1, 1)), `"nope"`},
		{"Ack/term 0", ack(pending, cp(bcCChan, 0, 1)), "needs a term >= 1 and a time tick"},
		{"Ack/time tick 0", ack(pending, cp(bcCChan, 1, 0)), "needs a term >= 1 and a time tick"},
		{"Ack/no node", anonymousAck(0, 1), "node_id and epoch are required"},
		{"Ack/no epoch", anonymousAck(1, 0), "node_id and epoch are required"},

		{"GetBroadcast/id 0", func(ctx context.Context) error {
			_, err := bc.GetBroadcast(ctx, &coordpb.GetBroadcastRequest{})
			return err
		}, "broadcast_id must be positive"},
		{"ListBroadcasts/limit 10001", func(ctx context.Context) error {
			_, err := bc.ListBroadcasts(ctx, &coordpb.ListBroadcastsRequest{Limit: 10001})
			return err
		}, "limit must be at most 10000"},
		{"RetryBroadcast/id 0", func(ctx context.Context) error {
			_, err := bc.RetryBroadcast(ctx, &coordpb.RetryBroadcastRequest{})
			return err
		}, "broadcast_id must be positive"},
		{"AbandonBroadcast/id 0", abandon(0, "r"), "broadcast id must be positive"},
		{"AbandonBroadcast/no reason", abandon(pending, ""), "abandoning a broadcast needs a reason"},
		{"AbandonBroadcast/long reason", abandon(pending, strings.Repeat("r", vocab.MaxReasonBytes+1)), "reason is 1025 bytes (max 1024)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := observeBroadcasts(t, tn, fb)
			err := tc.call(callCtx(t))
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("got %v; want InvalidArgument", err)
			}
			if !strings.Contains(st.Message(), tc.message) {
				t.Errorf("message %q does not contain %q", st.Message(), tc.message)
			}
			if after := observeBroadcasts(t, tn, fb); !reflect.DeepEqual(before, after) {
				t.Errorf("a rejected call changed state:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
	if task, _ := tn.node.State().BroadcastTask(pending); task.State != logpb.BroadcastState_BROADCAST_PENDING || len(task.Acked) != 0 {
		t.Errorf("the pending task changed: %v", task)
	}
}

// TestBroadcastConvertsRequest: the handler converts resource keys and
// scoped idempotency keys exactly, adds nothing (no CChannel, no Cluster
// key: the broadcaster's job) and converts the result back.
func TestBroadcastConvertsRequest(t *testing.T) {
	tn, fb, bc := startBroadcastNode(t)
	cps := []*logpb.VChannelCheckpoint{{Vchannel: bcCChan, Term: 3, Offset: 1<<63 + 5, TimeTick: 1 << 60}, {Vchannel: bcP1 + "_9v0", Term: 2, Offset: 7, TimeTick: 1<<60 + 1}}
	fb.setAnswer(func(context.Context, broadcaster.Request) (broadcaster.Result, error) {
		return broadcaster.Result{BroadcastID: 41, Duplicated: true, LockWait: 1500*time.Millisecond + 300*time.Microsecond, Checkpoints: cps}, nil
	})
	keys := []*coordpb.ResourceKey{
		{Domain: "db_name", Key: "db1", Shared: true}, {Domain: "COLLECTION_NAME", Key: "db1:c1"}, {Domain: "Privilege"},
		{Domain: "SNAPSHOT_NAME", Key: "9:snap"}, {Domain: "IMPORT_JOB_ID", Key: "job-1", Shared: true}, {Domain: "cluster", Shared: true},
	}
	wantKeys := []*logpb.ResourceKey{
		{Domain: logpb.ResourceDomain_RK_DB_NAME, Key: "db1", Shared: true}, {Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "db1:c1"},
		{Domain: logpb.ResourceDomain_RK_PRIVILEGE}, {Domain: logpb.ResourceDomain_RK_SNAPSHOT_NAME, Key: "9:snap"},
		{Domain: logpb.ResourceDomain_RK_IMPORT_JOB_ID, Key: "job-1", Shared: true}, {Domain: logpb.ResourceDomain_RK_CLUSTER, Shared: true},
	}
	targets := []string{bcP1 + "_9v0", bcP2}
	mustKey := func(k string, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, tc := range []struct {
		ik   *coordpb.IdempotencyKey
		want string
		enc  string
	}{
		{nil, "", ""},
		{&coordpb.IdempotencyKey{Scope: "CLUSTER", Key: "k1"}, mustKey(vocab.ClusterScopedKey("k1")), "cluster/0/2:k1"},
		{&coordpb.IdempotencyKey{Scope: "cluster", ScopeId: 0, Key: "a:b/c"}, mustKey(vocab.ClusterScopedKey("a:b/c")), "cluster/0/5:a:b/c"},
		{&coordpb.IdempotencyKey{Scope: "DATABASE", ScopeId: 7, Key: "abc"}, mustKey(vocab.DatabaseScopedKey(7, "abc")), "db/7/3:abc"},
		{&coordpb.IdempotencyKey{Scope: "Collection", ScopeId: 9, Key: "x:y"}, mustKey(vocab.CollectionScopedKey(9, "x:y")), "coll/9/3:x:y"},
	} {
		name := "none"
		if tc.ik != nil {
			name = tc.ik.Scope + "/" + tc.ik.Key
		}
		t.Run(name, func(t *testing.T) {
			if tc.want != tc.enc {
				t.Fatalf("commands encodes %q, this test expects %q", tc.want, tc.enc)
			}
			before := observe(t, tn.node)
			n := len(fb.requests())
			resp, err := bc.Broadcast(callCtx(t), &coordpb.BroadcastRequest{MessageType: "AlterUser", Payload: []byte{1, 2, 3},
				ResourceKeys: keys, Vchannels: targets, AckSyncUp: true, IdempotencyKey: tc.ik})
			if err != nil {
				t.Fatal(err)
			}
			reqs := fb.requests()
			if len(reqs) != n+1 {
				t.Fatalf("%d broadcasts, want %d", len(reqs), n+1)
			}
			got := reqs[n]
			if got.MessageType != "AlterUser" || string(got.Payload) != "\x01\x02\x03" || !got.AckSyncUp ||
				!slices.Equal(got.VChannels, targets) || got.IdempotencyKey != tc.want {
				t.Errorf("broadcaster got %+v", got)
			}
			if len(got.ResourceKeys) != len(wantKeys) {
				t.Fatalf("resource keys %v, want %v", got.ResourceKeys, wantKeys)
			}
			for i := range wantKeys {
				if !proto.Equal(got.ResourceKeys[i], wantKeys[i]) {
					t.Errorf("resource key %d = %v, want %v", i, got.ResourceKeys[i], wantKeys[i])
				}
			}
			want := &coordpb.BroadcastResponse{BroadcastId: 41, Duplicated: true, LockWaitMs: 1500, AppendResults: []*coordpb.Checkpoint{
				{Vchannel: bcCChan, Term: 3, Offset: 1<<63 + 5, TimeTick: 1 << 60}, {Vchannel: bcP1 + "_9v0", Term: 2, Offset: 7, TimeTick: 1<<60 + 1}}}
			if !proto.Equal(resp, want) {
				t.Errorf("response %v, want %v", resp, want)
			}
			// With targets given, the handler commits nothing itself.
			if after := observe(t, tn.node); !reflect.DeepEqual(before, after) {
				t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// TestBroadcastDefaultTargets: without targets, the handler passes the
// request on without targets (the broadcaster chooses them after its lock
// and idempotency check) and commits nothing itself, so a broadcast that
// fails leaves no VChannels behind.
func TestBroadcastDefaultTargets(t *testing.T) {
	tn, fb, bc := startBroadcastNode(t)
	fb.setAnswer(func(context.Context, broadcaster.Request) (broadcaster.Result, error) {
		return broadcaster.Result{}, &broadcaster.LockTimeoutError{Key: "CollectionName:db:c77@X", Waited: time.Second, Err: context.DeadlineExceeded}
	})
	before := observe(t, tn.node)
	payload, _ := proto.Marshal(&logpb.CreateCollectionPayload{CollectionId: 77, Shards: 2})
	_, err := bc.Broadcast(callCtx(t), &coordpb.BroadcastRequest{MessageType: vocab.MsgCreateCollection, Payload: payload})
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "CollectionName:db:c77@X") {
		t.Fatalf("err = %v, want DeadlineExceeded naming the key", err)
	}
	if coll, ok := tn.node.State().Collection(77); ok {
		t.Fatalf("a failed CreateCollection left collection 77 on %v", coll.Vchannels)
	}
	if after := observe(t, tn.node); !reflect.DeepEqual(before, after) {
		t.Errorf("state changed:\nbefore %+v\nafter  %+v", before, after)
	}
	for _, r := range fb.requests() {
		if len(r.VChannels) != 0 {
			t.Errorf("%s passed on with targets %v; the broadcaster chooses them", r.MessageType, r.VChannels)
		}
	}
}

// TestBroadcastErrorMapping: the broadcaster's errors become the
// documented codes, on every RPC that calls it.
func TestBroadcastErrorMapping(t *testing.T) {
	tn, fb, bc := startBroadcastNode(t)
	pending := mustCommit(t, tn, &logpb.CreateBroadcast{MessageType: "AlterCollection", Vchannels: []string{bcCChan}}).GetBroadcast().GetBroadcastId()
	lockErr := &broadcaster.LockTimeoutError{Key: "CollectionName:db1:c1@X", Waited: 2 * time.Second, Err: context.DeadlineExceeded}
	for _, tc := range []struct {
		name    string
		err     error
		code    codes.Code
		message string
	}{
		{"not primary", broadcaster.ErrNotPrimary, codes.FailedPrecondition, "cluster is not primary"},
		{"wrapped not primary", fmt.Errorf("create broadcast: %w", broadcaster.ErrNotPrimary), codes.FailedPrecondition, "cluster is not primary"},
		{"lock timeout", lockErr, codes.DeadlineExceeded, "waited 2s for resource key CollectionName:db1:c1@X"},
		{"wrapped lock timeout", fmt.Errorf("broadcast: %w", lockErr), codes.DeadlineExceeded, "CollectionName:db1:c1@X"},
		{"abandoned", fmt.Errorf("broadcast %d: %w: operator gave up", pending, broadcaster.ErrAbandoned), codes.Aborted, "broadcast abandoned"},
		{"not leader", fmt.Errorf("broadcaster: %w", leadership.ErrNotLeader), codes.Unavailable, "not the leader"},
		{"task not found", fmt.Errorf("broadcast %d: %w", pending, broadcaster.ErrTaskNotFound), codes.NotFound, "broadcast task not found"},
		{"task finished", fmt.Errorf("broadcast %d: %w", pending, broadcaster.ErrTaskFinished), codes.FailedPrecondition, "already finished"},
		{"rejected not primary", &commands.RejectedError{Code: logpb.RejectCode_REJECT_NOT_PRIMARY, Message: "cluster is not primary"},
			codes.FailedPrecondition, "cluster is not primary"},
		{"rejected exhausted", &commands.RejectedError{Code: logpb.RejectCode_REJECT_EXHAUSTED, Message: "65536 broadcasts pending"},
			codes.FailedPrecondition, "65536 broadcasts pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb.setAnswer(func(context.Context, broadcaster.Request) (broadcaster.Result, error) {
				return broadcaster.Result{}, tc.err
			})
			fb.setErr(tc.err)
			ctx := callCtx(t)
			_, err := bc.Broadcast(ctx, &coordpb.BroadcastRequest{MessageType: "AlterCollection"})
			checkStatus(t, "Broadcast", err, tc.code, tc.message)
			_, err = bc.Ack(ctx, &coordpb.AckRequest{BroadcastId: pending, Checkpoints: []*coordpb.Checkpoint{{Vchannel: bcCChan, Term: 1, TimeTick: 1}},
				NodeId: 1, Epoch: 1})
			checkStatus(t, "Ack", err, tc.code, tc.message)
			_, err = bc.RetryBroadcast(ctx, &coordpb.RetryBroadcastRequest{BroadcastId: pending})
			checkStatus(t, "RetryBroadcast", err, tc.code, tc.message)
			_, err = bc.AbandonBroadcast(ctx, &coordpb.AbandonBroadcastRequest{BroadcastId: pending, Reason: "r"})
			checkStatus(t, "AbandonBroadcast", err, tc.code, tc.message)
		})
	}
}

func checkStatus(t *testing.T, what string, err error, code codes.Code, message string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), message) {
		t.Errorf("%s: got %v; want %v mentioning %q", what, err, code, message)
	}
}

// TestBroadcastTasks: GetBroadcast and ListBroadcasts show the FSM's tasks;
// Retry and Abandon are handed to the broadcaster.
func TestBroadcastTasks(t *testing.T) {
	tn, fb, bc := startBroadcastNode(t)
	vA := vocab.VChannelName(bcP1, 9, 0)
	// A: completed, with keys, an idempotency key, acks, a payload.
	idemA, _ := vocab.CollectionScopedKey(9, "evt-1")
	a := mustCommit(t, tn, &logpb.CreateBroadcast{MessageType: "AlterCollection", Payload: []byte("abc"), AckSyncUp: true, IdempotencyKey: idemA,
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "db1:c9"}},
		Vchannels:    []string{vA, bcCChan}}).GetBroadcast().GetBroadcastId()
	cpsA := []*logpb.VChannelCheckpoint{{Vchannel: bcCChan, Term: 1, Offset: 10, TimeTick: 1 << 60}, {Vchannel: vA, Term: 2, Offset: 1 << 63, TimeTick: 1<<60 + 1}}
	mustCommit(t, tn, &logpb.AckBroadcast{BroadcastId: a, Checkpoints: cpsA})
	if c := mustCommit(t, tn, &logpb.CompleteBroadcast{BroadcastId: a}).GetCompletion(); !c.GetTombstoned() {
		t.Fatalf("complete A: %v", c)
	}
	// B: pending, one of two targets acked.
	b := mustCommit(t, tn, &logpb.CreateBroadcast{MessageType: "DropPartition", Vchannels: []string{bcCChan, bcP2}}).GetBroadcast().GetBroadcastId()
	mustCommit(t, tn, &logpb.AckBroadcast{BroadcastId: b, Checkpoints: []*logpb.VChannelCheckpoint{{Vchannel: bcP2, Term: 1, Offset: 1, TimeTick: 5}}})
	// C: pending, its callback refused (collection 5 was allocated directly
	// with 2 vchannels after its CreateCollection of 1 shard was created).
	payloadC, _ := proto.Marshal(&logpb.CreateCollectionPayload{CollectionId: 5, Shards: 1})
	vC := vocab.VChannelName(bcP1, 5, 0)
	c := mustCommit(t, tn, &logpb.CreateBroadcast{MessageType: vocab.MsgCreateCollection, Payload: payloadC, Vchannels: []string{bcCChan, vC}}).GetBroadcast().GetBroadcastId()
	mustCommit(t, tn, &logpb.AllocVirtualChannels{CollectionId: 5, Count: 2})
	mustCommit(t, tn, &logpb.AckBroadcast{BroadcastId: c, Checkpoints: []*logpb.VChannelCheckpoint{{Vchannel: bcCChan, Term: 1, Offset: 2, TimeTick: 6}, {Vchannel: vC, Term: 1, Offset: 3, TimeTick: 7}}})
	if comp := mustCommit(t, tn, &logpb.CompleteBroadcast{BroadcastId: c}).GetCompletion(); comp.GetTombstoned() || comp.GetCallbackError() == "" {
		t.Fatalf("complete C: %v; want a refused callback", comp)
	}
	// D: abandoned.
	d := mustCommit(t, tn, &logpb.CreateBroadcast{MessageType: "AlterCollection", Vchannels: []string{bcCChan}}).GetBroadcast().GetBroadcastId()
	mustCommit(t, tn, &logpb.AbandonBroadcast{BroadcastId: d, Reason: "streaming node gone"})

	ctx := callCtx(t)
	infoA, err := bc.GetBroadcast(ctx, &coordpb.GetBroadcastRequest{BroadcastId: a})
	if err != nil {
		t.Fatal(err)
	}
	taskA, _ := tn.node.State().BroadcastTask(a)
	wantA := &coordpb.BroadcastInfo{BroadcastId: a, MessageType: "AlterCollection", State: "TOMBSTONE",
		ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: "db1:c9"}, {Domain: "CLUSTER", Shared: true}},
		Vchannels:    []string{bcCChan, vA}, // sorted
		Acked: []*coordpb.Checkpoint{{Vchannel: bcCChan, Term: 1, Offset: 10, TimeTick: 1 << 60},
			{Vchannel: vA, Term: 2, Offset: 1 << 63, TimeTick: 1<<60 + 1}},
		AckSyncUp: true, IdempotencyKey: "coll/9/5:evt-1", CreatedUnixMs: taskA.CreatedMs, TombstonedUnixMs: taskA.TombstonedMs} // a tombstone has no payload
	if !proto.Equal(infoA, wantA) {
		t.Errorf("GetBroadcast(A):\n got %v\nwant %v", infoA, wantA)
	}
	if infoA.CreatedUnixMs <= 0 || infoA.TombstonedUnixMs < infoA.CreatedUnixMs {
		t.Errorf("times: created %d tombstoned %d", infoA.CreatedUnixMs, infoA.TombstonedUnixMs)
	}
	infoC, err := bc.GetBroadcast(ctx, &coordpb.GetBroadcastRequest{BroadcastId: c, Consistency: coordpb.ReadConsistency_STALE})
	if err != nil || infoC.State != "PENDING" || infoC.CallbackAttempts != 1 || !strings.Contains(infoC.LastError, "but its CreateCollection went to") ||
		infoC.TombstonedUnixMs != 0 || len(infoC.Acked) != 2 {
		t.Errorf("GetBroadcast(C) = %v, %v", infoC, err)
	}
	if infoD, err := bc.GetBroadcast(ctx, &coordpb.GetBroadcastRequest{BroadcastId: d}); err != nil || infoD.State != "TOMBSTONE" ||
		infoD.AbandonedReason != "streaming node gone" || infoD.CallbackAttempts != 0 {
		t.Errorf("GetBroadcast(D) = %v, %v", infoD, err)
	}
	for _, consistency := range []coordpb.ReadConsistency{coordpb.ReadConsistency_LINEARIZABLE, coordpb.ReadConsistency_STALE} {
		_, err := bc.GetBroadcast(ctx, &coordpb.GetBroadcastRequest{BroadcastId: 999_999, Consistency: consistency})
		checkStatus(t, "GetBroadcast(unknown)", err, codes.NotFound, "broadcast 999999 is unknown")
	}

	ids := func(r *coordpb.ListBroadcastsResponse, err error) []uint64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, b := range r.Broadcasts {
			out = append(out, b.BroadcastId)
		}
		return out
	}
	for _, tc := range []struct {
		req  *coordpb.ListBroadcastsRequest
		want []uint64
	}{
		{&coordpb.ListBroadcastsRequest{}, []uint64{a, b, c, d}},
		{&coordpb.ListBroadcastsRequest{Consistency: coordpb.ReadConsistency_STALE}, []uint64{a, b, c, d}},
		{&coordpb.ListBroadcastsRequest{PendingOnly: true}, []uint64{b, c}},
		{&coordpb.ListBroadcastsRequest{Limit: 2}, []uint64{c, d}},
		{&coordpb.ListBroadcastsRequest{PendingOnly: true, Limit: 1}, []uint64{c}},
		{&coordpb.ListBroadcastsRequest{Limit: 10000}, []uint64{a, b, c, d}},
	} {
		if got := ids(bc.ListBroadcasts(ctx, tc.req)); !slices.Equal(got, tc.want) {
			t.Errorf("ListBroadcasts(%v) = %v, want %v", tc.req, got, tc.want)
		}
	}
	list, _ := bc.ListBroadcasts(ctx, &coordpb.ListBroadcastsRequest{})
	if !proto.Equal(list.Broadcasts[0], infoA) {
		t.Errorf("listed A %v, got A %v", list.Broadcasts[0], infoA)
	}

	// Retry and Abandon reach the broadcaster, which decides whether the
	// task is pending (controller/broadcaster TestOperatorActionsNeedAPendingTask;
	// TestBroadcastErrorMapping maps its refusals).
	if _, err := bc.RetryBroadcast(ctx, &coordpb.RetryBroadcastRequest{BroadcastId: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := bc.AbandonBroadcast(ctx, &coordpb.AbandonBroadcastRequest{BroadcastId: c, Reason: "collection 5 is stuck"}); err != nil {
		t.Fatal(err)
	}
	ackCPs := []*coordpb.Checkpoint{{Vchannel: bcCChan, Term: 4, Offset: 9, TimeTick: 99}}
	if _, err := bc.Ack(ctx, &coordpb.AckRequest{BroadcastId: b, Checkpoints: ackCPs, NodeId: 7, Epoch: 70}); err != nil {
		t.Fatal(err)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if !slices.Equal(fb.retries, []uint64{b}) || !reflect.DeepEqual(fb.abandons, []fakeAbandon{{c, "collection 5 is stuck"}}) || len(fb.acks) != 1 ||
		fb.acks[0].id != b || len(fb.acks[0].cps) != 1 || fb.acks[0].node != 7 || fb.acks[0].epoch != 70 ||
		!proto.Equal(fb.acks[0].cps[0], &logpb.VChannelCheckpoint{Vchannel: bcCChan, Term: 4, Offset: 9, TimeTick: 99}) {
		t.Errorf("broadcaster got retries %v abandons %v acks %v", fb.retries, fb.abandons, fb.acks)
	}
}

// TestBroadcasterNotConfigured: without a broadcaster, Broadcast, Retry and
// Abandon are Unavailable; Ack commits directly, and only the channel's
// current owner is heard, for a term no newer than the channel's.
func TestBroadcasterNotConfigured(t *testing.T) {
	tn := startTestNode(t)
	mustCommit(t, tn, &logpb.InitStreaming{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1}})
	owner := mustCommit(t, tn, &logpb.RegisterStreamingNode{Address: "127.0.0.1:7301", Incarnation: "a"}).GetRegisterNode()
	other := mustCommit(t, tn, &logpb.RegisterStreamingNode{Address: "127.0.0.1:7302", Incarnation: "b"}).GetRegisterNode()
	p1, _ := tn.node.State().PChannel(bcP1)
	assigned := mustCommit(t, tn, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: bcP1, NodeId: owner.NodeId, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: p1.Term}}}).GetAssign().GetAssigned()
	mustCommit(t, tn, &logpb.AssignPChannelsDone{Channels: assigned})
	term := assigned[0].Term
	id := mustCommit(t, tn, &logpb.CreateBroadcast{MessageType: "AlterCollection", Vchannels: []string{bcCChan, bcP1}, AckSyncUp: true}).GetBroadcast().GetBroadcastId()
	bc := coordpb.NewBroadcasterClient(tn.conn)
	ctx := callCtx(t)
	_, err := bc.Broadcast(ctx, &coordpb.BroadcastRequest{MessageType: "AlterCollection"})
	checkStatus(t, "Broadcast", err, codes.Unavailable, "broadcaster not configured")
	_, err = bc.RetryBroadcast(ctx, &coordpb.RetryBroadcastRequest{BroadcastId: id})
	checkStatus(t, "RetryBroadcast", err, codes.Unavailable, "broadcaster not configured")
	_, err = bc.AbandonBroadcast(ctx, &coordpb.AbandonBroadcastRequest{BroadcastId: id, Reason: "r"})
	checkStatus(t, "AbandonBroadcast", err, codes.Unavailable, "broadcaster not configured")
	ack := func(node *logpb.RegisterNodeResult, term int64) error {
		_, err := bc.Ack(ctx, &coordpb.AckRequest{BroadcastId: id, NodeId: node.NodeId, Epoch: node.Epoch,
			Checkpoints: []*coordpb.Checkpoint{{Vchannel: bcP1, Term: term, Offset: 3, TimeTick: 8}}})
		return err
	}
	checkStatus(t, "Ack from another node", ack(other, term), codes.FailedPrecondition, "is owned by streaming node")
	checkStatus(t, "Ack at a newer term than the channel's", ack(owner, term+1), codes.Aborted, "is at term")
	if task, _ := tn.node.State().BroadcastTask(id); len(task.Acked) != 0 {
		t.Fatalf("refused acks were recorded: %v", task.Acked)
	}
	// The owner acks a record of an older term (one a previous owner
	// persisted, found again when the owner deduplicated a re-append).
	if err := ack(owner, term-1); err != nil {
		t.Fatal(err)
	}
	if task, _ := tn.node.State().BroadcastTask(id); len(task.Acked) != 1 || task.Acked[0].Vchannel != bcP1 || task.Acked[0].Term != term-1 {
		t.Errorf("after Ack: %v", task)
	}
}

// TestUpdateReplicateConfigurationBroadcasts: an equal configuration
// succeeds without a broadcast; one this cluster cannot take is refused
// without a broadcast; a valid one is one AlterReplicateConfig broadcast
// under the exclusive Cluster key, to every PChannel (CChannel for its own).
func TestUpdateReplicateConfigurationBroadcasts(t *testing.T) {
	tn, fb, _ := startBroadcastNode(t)
	ch := coordpb.NewChannelsClient(tn.conn)
	// The fake completes the broadcast the way the callback would: it
	// installs the configuration.
	install := func(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error) {
		var cfg logpb.ReplicateConfiguration
		if err := proto.Unmarshal(req.Payload, &cfg); err != nil {
			return broadcaster.Result{}, err
		}
		res, err := commands.Propose(ctx, tn.node, &logpb.UpdateReplicateConfiguration{Config: &cfg}, "")
		if err != nil {
			return broadcaster.Result{}, err
		}
		if res.Rejection != nil {
			return broadcaster.Result{}, errors.New(res.Rejection.Message)
		}
		return broadcaster.Result{BroadcastID: 100}, nil
	}
	fb.setAnswer(install)
	update := func(cfg *coordpb.ReplicateConfiguration) error {
		_, err := ch.UpdateReplicateConfiguration(callCtx(t), &coordpb.UpdateReplicateConfigurationRequest{Config: cfg})
		return err
	}
	cfg := &coordpb.ReplicateConfiguration{Clusters: []*coordpb.ReplicateCluster{
		{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1}}, {ClusterId: "by-dev2", Pchannels: []string{"by-dev2-dml_0", "by-dev2-dml_1"}}},
		Topology: []*coordpb.ReplicateTopology{{SourceClusterId: bcCluster, TargetClusterId: "by-dev2"}}}
	if err := update(cfg); err != nil {
		t.Fatal(err)
	}
	reqs := fb.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d broadcasts, want 1", len(reqs))
	}
	r := reqs[0]
	wantCfg := logReplicateConfig(t, cfg)
	var gotCfg logpb.ReplicateConfiguration
	if err := proto.Unmarshal(r.Payload, &gotCfg); err != nil || !proto.Equal(&gotCfg, wantCfg) {
		t.Errorf("payload %v (%v), want %v", &gotCfg, err, wantCfg)
	}
	if r.MessageType != vocab.MsgAlterReplicateConfig || len(r.ResourceKeys) != 1 ||
		!proto.Equal(r.ResourceKeys[0], &logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_CLUSTER}) ||
		len(r.VChannels) != 0 || r.IdempotencyKey != "" || r.AckSyncUp {
		t.Errorf("broadcast %+v", r)
	}
	if got := tn.node.State().ReplicateConfiguration(); !proto.Equal(got, wantCfg) {
		t.Fatalf("installed %v, want %v", got, wantCfg)
	}

	// The same configuration again: done, no broadcast.
	if err := update(cfg); err != nil {
		t.Fatal(err)
	}
	// Invalid for this cluster, or invalid at all: refused, no broadcast.
	for _, tc := range []struct {
		name    string
		cfg     *coordpb.ReplicateConfiguration
		message string
	}{
		{"without this cluster", &coordpb.ReplicateConfiguration{Clusters: []*coordpb.ReplicateCluster{{ClusterId: "other", Pchannels: []string{"o_0"}}}},
			`does not list this cluster "by-dev"`},
		{"unknown pchannel", &coordpb.ReplicateConfiguration{Clusters: []*coordpb.ReplicateCluster{
			{ClusterId: bcCluster, Pchannels: []string{bcP0, "by-dev-rootcoord-dml_9"}}, {ClusterId: "by-dev2", Pchannels: []string{"by-dev2-dml_0", "by-dev2-dml_1"}}}},
			"by-dev-rootcoord-dml_9, which this cluster does not have"},
		{"pchannels reordered", &coordpb.ReplicateConfiguration{Clusters: []*coordpb.ReplicateCluster{
			{ClusterId: bcCluster, Pchannels: []string{bcP1, bcP0}}, {ClusterId: "by-dev2", Pchannels: []string{"by-dev2-dml_0", "by-dev2-dml_1"}}}},
			"may only be extended by appending"},
		{"no clusters", &coordpb.ReplicateConfiguration{}, "needs 1..64 clusters"},
		{"uneven pchannels", &coordpb.ReplicateConfiguration{Clusters: []*coordpb.ReplicateCluster{
			{ClusterId: bcCluster, Pchannels: []string{bcP0}}, {ClusterId: "by-dev2", Pchannels: []string{"by-dev2-dml_0", "by-dev2-dml_1"}}}},
			"same number of pchannels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkStatus(t, "UpdateReplicateConfiguration", update(tc.cfg), codes.InvalidArgument, tc.message)
		})
	}
	if n := len(fb.requests()); n != 1 {
		t.Fatalf("%d broadcasts, want still 1", n)
	}
	if got := tn.node.State().ReplicateConfiguration(); !proto.Equal(got, wantCfg) {
		t.Fatalf("configuration changed to %v", got)
	}

	// A broadcast that completes without installing it, and broadcaster
	// errors, are reported.
	cfg2 := proto.Clone(cfg).(*coordpb.ReplicateConfiguration)
	cfg2.Clusters[0].Pchannels = append(cfg2.Clusters[0].Pchannels, bcP2)
	cfg2.Clusters[1].Pchannels = append(cfg2.Clusters[1].Pchannels, "by-dev2-dml_2")
	fb.setAnswer(nil)
	checkStatus(t, "UpdateReplicateConfiguration", update(cfg2), codes.FailedPrecondition, "was not installed")
	fb.setAnswer(func(context.Context, broadcaster.Request) (broadcaster.Result, error) {
		return broadcaster.Result{}, &broadcaster.LockTimeoutError{Key: "Cluster@X", Waited: time.Second, Err: context.DeadlineExceeded}
	})
	checkStatus(t, "UpdateReplicateConfiguration", update(cfg2), codes.DeadlineExceeded, "Cluster@X")
	fb.setAnswer(install)
	if err := update(cfg2); err != nil {
		t.Fatal(err)
	}
	if n := len(fb.requests()); n != 4 {
		t.Fatalf("%d broadcasts, want 4", n)
	}
}
