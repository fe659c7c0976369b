package broadcaster

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// createCollection600 is a CreateCollection of collection 600 (2 shards)
// under the collection key db:name, to shard 0 on h.pch[p0] and shard 1
// on h.pch[p1].
func createCollection600(t *testing.T, h *harness, name string, p0, p1 int) (Request, []string) {
	targets := []string{vocab.VChannelName(h.pch[p0], 600, 0), vocab.VChannelName(h.pch[p1], 600, 1)}
	return Request{MessageType: vocab.MsgCreateCollection,
		Payload:      mustMarshal(t, &logpb.CreateCollectionPayload{CollectionId: 600, Shards: 2}),
		ResourceKeys: []*logpb.ResourceKey{collKey("db", name, false)}, VChannels: targets}, targets
}

// settleAfterRefusedCreate checks what must hold once the second of two
// CreateCollections of collection 600 was answered: it was refused as a
// conflict, the first finishes with its targets recorded, no task is left
// pending (holding the shared Cluster key), and an exclusive-Cluster
// broadcast then runs.
func settleAfterRefusedCreate(t *testing.T, h *harness, second asyncResult, first <-chan asyncResult, firstTargets []string) {
	t.Helper()
	var rej *commands.RejectedError
	if !errors.As(second.err, &rej) || rej.Code != logpb.RejectCode_REJECT_CONFLICT {
		t.Fatalf("the second CreateCollection of collection 600 answered id=%d err=%v; want it refused as a conflict "+
			"with the pending one (tasks now: %d pending)", second.res.BroadcastID, second.err, len(h.leader.State().PendingBroadcasts()))
	}
	if r := h.wait(first); r.err != nil {
		t.Fatalf("the first CreateCollection: %v", r.err)
	}
	if n := len(h.leader.State().PendingBroadcasts()); n != 0 {
		t.Fatalf("%d tasks still pending", n)
	}
	if c, ok := h.leader.State().Collection(600); !ok || !sameTargets(c.Vchannels, firstTargets) {
		t.Fatalf("collection 600 has vchannels %v, want the first create's %v", c.GetVchannels(), firstTargets)
	}
	r := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, Request{MessageType: "AlterAlias", Payload: []byte{0},
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_CLUSTER}}}))
	if r.err != nil {
		t.Fatalf("an exclusive-Cluster broadcast after them: %v", r.err)
	}
}

// TestSecondCreateCollectionWithOtherTargetsIsRefused (probe D12): two
// CreateCollections of one collection under different resource keys and
// with different targets. The first is pending (its appends keep failing)
// when the second arrives; the second used to be accepted too, and
// whichever completed second failed its callback for ever while holding
// the shared Cluster key. It is refused at admission now.
func TestSecondCreateCollectionWithOtherTargetsIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	first, firstTargets := createCollection600(t, h, "a600", 0, 1)
	second, _ := createCollection600(t, h, "b600", 2, 3)
	var unreachable atomic.Bool
	unreachable.Store(true)
	h.app.setOnAppend(func(c appendCall) error {
		if unreachable.Load() && (c.VChannel == firstTargets[0] || c.VChannel == firstTargets[1]) {
			return errors.New("node unreachable")
		}
		return nil
	})
	r1 := broadcastAsync(ctxTimeout(t, 10*time.Second), h.m, first)
	h.eventually("the first create is pending", func() bool { return len(h.leader.State().PendingBroadcasts()) == 1 })
	r2 := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, second))
	unreachable.Store(false)
	settleAfterRefusedCreate(t, h, r2, r1, firstTargets)
}

// TestConcurrentCreateCollectionAdmissionsAreSerialised (probe D12, the
// race): the second CreateCollection holds its keys while the first's
// CreateBroadcast is still queued for the log. Its admission waits for
// the first's outcome, then refuses it, instead of deciding on a state
// that shows neither.
func TestConcurrentCreateCollectionAdmissionsAreSerialised(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	first, firstTargets := createCollection600(t, h, "a600", 0, 1)
	second, _ := createCollection600(t, h, "b600", 2, 3)
	queued, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.leader.SetAfterQueued(func(body proto.Message) {
		if _, ok := body.(*logpb.CreateBroadcast); ok {
			once.Do(func() { close(queued); <-release })
		}
	})
	r1 := broadcastAsync(ctxTimeout(t, 10*time.Second), h.m, first)
	<-queued
	r2 := broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, second)
	h.eventually("the second holds its keys", func() bool {
		_, exclusive, _ := locksOf(h.m).holders(second.ResourceKeys[0])
		return exclusive
	})
	close(release)
	settleAfterRefusedCreate(t, h, h.wait(r2), r1, firstTargets)
}

// TestCreateCollectionWithoutTargetsFollowsThePendingOne: a second
// CreateCollection of a collection with a pending one that names no
// targets takes the pending one's (rather than planning its own), so both
// callbacks succeed; one with another shard count is refused.
func TestCreateCollectionWithoutTargetsFollowsThePendingOne(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	first, firstTargets := createCollection600(t, h, "a600", 2, 3)
	var unreachable atomic.Bool
	unreachable.Store(true)
	h.app.setOnAppend(func(c appendCall) error {
		if unreachable.Load() && c.VChannel == firstTargets[0] {
			return errors.New("node unreachable")
		}
		return nil
	})
	r1 := broadcastAsync(ctxTimeout(t, 10*time.Second), h.m, first)
	h.eventually("the first create is pending", func() bool { return len(h.leader.State().PendingBroadcasts()) == 1 })

	other := Request{MessageType: vocab.MsgCreateCollection, Payload: mustMarshal(t, &logpb.CreateCollectionPayload{CollectionId: 600, Shards: 3}),
		ResourceKeys: []*logpb.ResourceKey{collKey("db", "c600", false)}}
	var rej *commands.RejectedError
	if r := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, other)); !errors.As(r.err, &rej) || rej.Code != logpb.RejectCode_REJECT_CONFLICT {
		t.Fatalf("a CreateCollection of 600 with 3 shards: %v; want a conflict with the pending one's 2", r.err)
	}
	follow := Request{MessageType: vocab.MsgCreateCollection, Payload: first.Payload,
		ResourceKeys: []*logpb.ResourceKey{collKey("db", "c600", false)}}
	r2 := broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, follow)
	h.eventually("the follower is pending", func() bool { return len(h.leader.State().PendingBroadcasts()) == 2 })
	unreachable.Store(false)
	res1, res2 := h.wait(r1), h.wait(r2)
	if res1.err != nil || res2.err != nil || res1.res.BroadcastID == res2.res.BroadcastID {
		t.Fatalf("the CreateCollections of 600: %+v, %+v; want two tasks, both finished", res1, res2)
	}
	bt, ok := h.leader.State().BroadcastTask(res2.res.BroadcastID)
	if c, _ := h.leader.State().Collection(600); !ok || !sameTargets(withoutCChannel(h.leader.State(), bt.Vchannels), firstTargets) ||
		!sameTargets(c.GetVchannels(), firstTargets) {
		t.Fatalf("the follower went to %v, collection 600 has %v; want both %v", bt.GetVchannels(), c.GetVchannels(), firstTargets)
	}
}
