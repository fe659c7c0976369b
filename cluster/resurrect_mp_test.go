package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/vocab"
)

// TestCreateRetryAfterDropDoesNotResurrect, through the public gRPC API of
// a three-member cluster with two streaming nodes: a collection is created
// (with an idempotency key) and dropped; the original CreateCollection is
// then retried with the same key, once through the client and once raw
// through each member (followers forward). Every retry answers the
// original task (duplicated); the collection stays dropped; no VChannel
// appears anywhere; no new task is created; and the create message is in
// each of its VChannels' WALs exactly once, with nothing appended after
// the drop.
func TestCreateRetryAfterDropDoesNotResurrect(t *testing.T) {
	const coll = 4242
	l, c := startChannelCluster(t, 2)
	cs := dialAll(t, l)
	waitPlacement(t, c, 30*time.Second, "all channels assigned", func(ps map[string]placement) bool { return allAssigned(ps, 0) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	create := broadcastSpec(coll)
	created, err := c.Broadcast(ctx, create)
	if err != nil {
		t.Fatalf("create collection %d: %v", coll, err)
	}
	info, err := c.GetBroadcast(ctx, created.BroadcastId)
	if err != nil || info.State != "TOMBSTONE" {
		t.Fatalf("create broadcast %d: %v %v", created.BroadcastId, info, err)
	}
	colls, err := c.ListVirtualChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE, coll)
	if err != nil || len(colls) != 1 || len(colls[0].Vchannels) != 2 {
		t.Fatalf("collection %d after create: %v %v", coll, colls, err)
	}
	vchannels := colls[0].Vchannels

	dropped, err := c.Broadcast(ctx, client.BroadcastSpec{
		MessageType: vocab.MsgDropCollection,
		Payload:     client.DropCollectionPayload(coll),
		Idempotency: &client.IdempotencyKey{Scope: "COLLECTION", ScopeID: coll, Key: "drop"},
	})
	if err != nil {
		t.Fatalf("drop collection %d: %v", coll, err)
	}
	type inventory struct {
		vchannels int
		tasks     int
	}
	take := func() inventory {
		t.Helper()
		all, err := c.ListVirtualChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE, 0)
		if err != nil {
			t.Fatalf("list vchannels: %v", err)
		}
		var inv inventory
		for _, cv := range all {
			inv.vchannels += len(cv.Vchannels)
			if cv.CollectionId == coll && len(cv.Vchannels) > 0 {
				t.Fatalf("collection %d is listed with vchannels %v", coll, cv.Vchannels)
			}
		}
		bs, err := c.ListBroadcasts(ctx, false, 1000)
		if err != nil {
			t.Fatalf("list broadcasts: %v", err)
		}
		inv.tasks = len(bs)
		return inv
	}
	afterDrop := take()

	// The retry, through the SDK and raw through every member.
	check := func(who string, resp *coordpb.BroadcastResponse, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("retry of the create through %s: %v", who, err)
		}
		if !resp.Duplicated || resp.BroadcastId != created.BroadcastId {
			t.Fatalf("retry of the create through %s answered broadcast %d (duplicated %v), want the original %d",
				who, resp.BroadcastId, resp.Duplicated, created.BroadcastId)
		}
	}
	resp, err := c.Broadcast(ctx, create)
	check("the client", resp, err)
	key := &coordpb.IdempotencyKey{Scope: "COLLECTION", ScopeId: coll, Key: create.Idempotency.Key}
	for i, conn := range cs.conns {
		resp, err := coordpb.NewBroadcasterClient(conn).Broadcast(ctx, &coordpb.BroadcastRequest{
			MessageType: create.MessageType, Payload: create.Payload, IdempotencyKey: key})
		check(l.Members()[i].ID, resp, err)
	}

	if got := take(); got != afterDrop {
		t.Fatalf("after the retries: %+v, after the drop: %+v", got, afterDrop)
	}
	// The WALs: the create once in each of its VChannels, then the drop,
	// and nothing after it.
	for _, v := range vchannels {
		recs, err := wal.ReadAll(l.WALDir(), vocab.PChannelOf(v), v, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, rec := range recs {
			if rec.BroadcastID != 0 {
				ids = append(ids, rec.BroadcastID)
			}
		}
		if len(ids) != 2 || ids[0] != created.BroadcastId || ids[1] != dropped.BroadcastId {
			t.Fatalf("broadcasts in %s's WAL: %v, want the create %d then the drop %d", v, ids, created.BroadcastId, dropped.BroadcastId)
		}
	}
}
