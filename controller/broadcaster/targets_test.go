package broadcaster

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

func sorted(ss []string) string {
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return fmt.Sprint(out)
}

// wantInWALs fails unless broadcast id is in the WAL of every channel of
// want and the task's targets are exactly want.
func wantInWALs(t *testing.T, h *harness, id uint64, want []string) {
	t.Helper()
	bt := taskOf(t, h.leader, id)
	if sorted(bt.Vchannels) != sorted(want) {
		t.Fatalf("broadcast %d targets %v, want %v", id, bt.Vchannels, want)
	}
	for _, v := range want {
		if _, ok := h.app.walEntry(v, id); !ok {
			t.Fatalf("broadcast %d is not in the WAL of %s", id, v)
		}
	}
}

// TestDefaultTargets: a request without targets gets the targets of its
// type, chosen by the manager; a CreateCollection's callback records
// exactly the VChannels its message went to, and a DropCollection reaches
// the collection's VChannels.
func TestDefaultTargets(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	plan, r := h.leader.State().PlanCollectionVChannels(50, 2)
	if r != nil {
		t.Fatal(r)
	}
	res, err := broadcast(h.m, ctxTimeout(t, 5*time.Second), Request{MessageType: vocab.MsgCreateCollection,
		Payload: mustMarshal(t, &logpb.CreateCollectionPayload{CollectionId: 50, Shards: 2})})
	if err != nil {
		t.Fatalf("CreateCollection: %v", err)
	}
	wantInWALs(t, h, res.BroadcastID, append([]string{h.cch}, plan...))
	if c, ok := h.leader.State().Collection(50); !ok || sorted(c.Vchannels) != sorted(plan) {
		t.Fatalf("collection 50 recorded on %v, its CreateCollection went to %v", c, plan)
	}

	res, err = broadcast(h.m, ctxTimeout(t, 5*time.Second), Request{MessageType: vocab.MsgDropCollection,
		Payload: mustMarshal(t, &logpb.DropCollectionPayload{CollectionId: 50})})
	if err != nil {
		t.Fatalf("DropCollection: %v", err)
	}
	wantInWALs(t, h, res.BroadcastID, append([]string{h.cch}, plan...))
	if _, ok := h.leader.State().Collection(50); ok {
		t.Fatal("collection 50 still has vchannels after its DropCollection")
	}

	// Cluster-level messages skip PChannels unavailable in replication;
	// AlterReplicateConfig reaches them all.
	cfg := &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{{ClusterId: testClusterID, Pchannels: h.pch[:3]}}}
	h.leader.MustPropose(t, &logpb.UpdateReplicateConfiguration{Config: cfg})
	res, err = broadcast(h.m, ctxTimeout(t, 5*time.Second), Request{MessageType: "CreateIndex"})
	if err != nil {
		t.Fatalf("CreateIndex: %v", err)
	}
	wantInWALs(t, h, res.BroadcastID, []string{h.cch, h.pch[1], h.pch[2]})
	res, err = broadcast(h.m, ctxTimeout(t, 5*time.Second), Request{MessageType: vocab.MsgAlterReplicateConfig,
		Payload: mustMarshal(t, &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{{ClusterId: testClusterID, Pchannels: h.pch}}})})
	if err != nil {
		t.Fatalf("AlterReplicateConfig: %v", err)
	}
	wantInWALs(t, h, res.BroadcastID, []string{h.cch, h.pch[1], h.pch[2], h.pch[3]})
}

// TestFailedCreateCollectionLeaksNothing: a CreateCollection that times out
// waiting for its keys leaves no VChannels and no task behind.
func TestFailedCreateCollectionLeaksNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	g, _ := locksOf(h.m).tryLock(commands.NormalizeResourceKeys([]*logpb.ResourceKey{collKey("db", "c77", false)}))
	_, err := broadcast(h.m, ctxTimeout(t, 100*time.Millisecond), Request{MessageType: vocab.MsgCreateCollection,
		Payload:      mustMarshal(t, &logpb.CreateCollectionPayload{CollectionId: 77, Shards: 2}),
		ResourceKeys: []*logpb.ResourceKey{collKey("db", "c77", false)}})
	var lt *LockTimeoutError
	if !errors.As(err, &lt) {
		t.Fatalf("err = %v, want a lock timeout", err)
	}
	g.release()
	if c, ok := h.leader.State().Collection(77); ok {
		t.Fatalf("a failed CreateCollection left collection 77 on %v", c.Vchannels)
	}
	if n := len(h.leader.State().BroadcastTasks()); n != 0 {
		t.Fatalf("%d tasks after a failed broadcast", n)
	}
}

// TestIdempotentRetryDoesNotResurrect: a CreateCollection retried with its
// idempotency key after the collection was dropped answers the original
// task and allocates nothing.
func TestIdempotentRetryDoesNotResurrect(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	key, err := vocab.ClusterScopedKey("create-c5")
	if err != nil {
		t.Fatal(err)
	}
	create := Request{MessageType: vocab.MsgCreateCollection, IdempotencyKey: key,
		Payload: mustMarshal(t, &logpb.CreateCollectionPayload{CollectionId: 5, Shards: 2})}
	first, err := broadcast(h.m, ctxTimeout(t, 5*time.Second), create)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broadcast(h.m, ctxTimeout(t, 5*time.Second), Request{MessageType: vocab.MsgDropCollection,
		Payload: mustMarshal(t, &logpb.DropCollectionPayload{CollectionId: 5})}); err != nil {
		t.Fatal(err)
	}
	again, err := broadcast(h.m, ctxTimeout(t, 5*time.Second), create)
	if err != nil || !again.Duplicated || again.BroadcastID != first.BroadcastID {
		t.Fatalf("retry: %+v, %v; want the original %d, duplicated", again, err, first.BroadcastID)
	}
	if c, ok := h.leader.State().Collection(5); ok {
		t.Fatalf("the retry resurrected collection 5 on %v", c.Vchannels)
	}
}

// TestDoomedCreateCollectionRefused: a CreateCollection whose callback
// could never succeed is refused before any task exists, its keys are
// released, and a FlushAll (exclusive Cluster key) goes through.
func TestDoomedCreateCollectionRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	h.leader.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: 60, Count: 2})
	for _, req := range []Request{
		{MessageType: vocab.MsgCreateCollection, Payload: mustMarshal(t, &logpb.CreateCollectionPayload{CollectionId: 60, Shards: 3}),
			ResourceKeys: []*logpb.ResourceKey{collKey("db", "c60", false)}},
		{MessageType: vocab.MsgCreateCollection, Payload: mustMarshal(t, &logpb.CreateCollectionPayload{CollectionId: 60, Shards: 2}),
			VChannels: []string{h.vch(2, 60), vocab.VChannelName(h.pch[3], 60, 1)}},
	} {
		_, err := broadcast(h.m, ctxTimeout(t, 2*time.Second), req)
		var rej *commands.RejectedError
		if !errors.As(err, &rej) || rej.Code != logpb.RejectCode_REJECT_CONFLICT {
			t.Fatalf("err = %v, want a CONFLICT refusal", err)
		}
	}
	if n := len(h.leader.State().BroadcastTasks()); n != 0 {
		t.Fatalf("%d tasks after refusals", n)
	}
	if _, err := broadcast(h.m, ctxTimeout(t, 2*time.Second), Request{MessageType: vocab.MsgFlushAll,
		ResourceKeys: []*logpb.ResourceKey{clusterKey(false)}}); err != nil {
		t.Fatalf("FlushAll after the refusals: %v", err)
	}
}

// TestReplicateConfigCheckedUnderTheLock: two incompatible configuration
// updates race; the second is checked once it holds the exclusive Cluster
// key, after the first is installed, and refused without a task, so the
// key is not held by a callback that can never succeed.
func TestReplicateConfigCheckedUnderTheLock(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	cfgOn := func(p string) []byte {
		return mustMarshal(t, &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{
			{ClusterId: testClusterID, Pchannels: []string{p}}}})
	}
	gate := make(chan struct{})
	h.app.setOnAppend(func(c appendCall) error {
		if c.ID != 0 && taskOf(t, h.leader, c.ID).MessageType == vocab.MsgAlterReplicateConfig {
			<-gate
		}
		return nil
	})
	a := broadcastAsync(ctxTimeout(t, 10*time.Second), h.m, Request{MessageType: vocab.MsgAlterReplicateConfig, Payload: cfgOn(h.pch[0])})
	h.eventually("A appending", func() bool { return len(h.app.Calls()) > 0 })
	// B is valid against today's (empty) configuration, not against A's.
	b := broadcastAsync(ctxTimeout(t, 10*time.Second), h.m, Request{MessageType: vocab.MsgAlterReplicateConfig, Payload: cfgOn(h.pch[1]),
		ResourceKeys: []*logpb.ResourceKey{clusterKey(true)}}) // asks for shared; the type holds it exclusively
	h.eventually("B waiting for the Cluster key", func() bool {
		_, _, w := locksOf(h.m).holders(clusterKey(false))
		return w == 1
	})
	close(gate)
	if r := h.wait(a); r.err != nil {
		t.Fatalf("A: %v", r.err)
	}
	r := h.wait(b)
	var rej *commands.RejectedError
	if !errors.As(r.err, &rej) || !strings.Contains(rej.Message, "extended by appending") {
		t.Fatalf("B: %v, want a refusal at creation", r.err)
	}
	if n := len(h.leader.State().PendingBroadcasts()); n != 0 {
		t.Fatalf("%d pending tasks after B's refusal", n)
	}
	if _, err := broadcast(h.m, ctxTimeout(t, 2*time.Second), Request{MessageType: "CreateIndex"}); err != nil {
		t.Fatalf("a broadcast after B: %v", err)
	}
	// A raw configuration that does not list this cluster is refused too.
	_, err := broadcast(h.m, ctxTimeout(t, 2*time.Second), Request{MessageType: vocab.MsgAlterReplicateConfig,
		Payload: mustMarshal(t, &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{{ClusterId: "other", Pchannels: []string{"o_0"}}}})})
	if !errors.As(err, &rej) || !strings.Contains(rej.Message, "does not list this cluster") {
		t.Fatalf("raw config without this cluster: %v", err)
	}
	if n := len(h.leader.State().PendingBroadcasts()); n != 0 {
		t.Fatalf("%d pending tasks after the refusal", n)
	}
}

// TestLockTimeoutBeatsTheCallersDeadline: a lock wait gives up before the
// caller's deadline, so the error naming the key is what the caller (and a
// forwarding member with the same deadline) sees, not its own timeout.
func TestLockTimeoutBeatsTheCallersDeadline(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	key := collKey("db", "held", false)
	g, _ := locksOf(h.m).tryLock(commands.NormalizeResourceKeys([]*logpb.ResourceKey{key}))
	defer g.release()
	ctx := ctxTimeout(t, time.Second)
	_, err := broadcast(h.m, ctx, Request{MessageType: "CreateIndex", ResourceKeys: []*logpb.ResourceKey{key}})
	var lt *LockTimeoutError
	if !errors.As(err, &lt) || !strings.Contains(err.Error(), "CollectionName:db:held") {
		t.Fatalf("err = %v, want a lock timeout naming the key", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the lock wait ran into the caller's deadline (%v)", ctx.Err())
	}
}
