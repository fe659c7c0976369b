package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/vocab"
)

// TestBroadcastsSurviveLeaderKill: clients broadcast CreateCollection
// messages (each with an idempotency key, so retries are safe) while the
// coordd leader is SIGKILLed mid-stream. Every broadcast completes exactly
// once: one task per key, a TOMBSTONE, its callback's effect (the
// collection's VChannels) present, and exactly one copy of the message in
// every target VChannel's WAL. Retrying a key after the failover returns
// the original task.
func TestBroadcastsSurviveLeaderKill(t *testing.T) {
	l, c := startChannelCluster(t, 2)
	cs := dialAll(t, l)
	waitPlacement(t, c, 30*time.Second, "all channels assigned", func(ps map[string]placement) bool { return allAssigned(ps, 0) })

	type done struct {
		coll int64
		resp *coordpb.BroadcastResponse
	}
	var mu sync.Mutex
	var results []done
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	const workers, perWorker = 4, 8
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				coll := int64(1000 + w*100 + i)
				ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
				resp, err := c.Broadcast(ctx, broadcastSpec(coll))
				cancel()
				if err != nil {
					errs <- fmt.Errorf("collection %d: %w", coll, err)
					return
				}
				mu.Lock()
				results = append(results, done{coll, resp})
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	leader := leaderIndex(t, l, cs, -1)
	if err := l.Kill(leader); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := l.StartMember(leader); err != nil {
		t.Fatal(err)
	}
	if len(results) != workers*perWorker {
		t.Fatalf("%d broadcasts completed, want %d", len(results), workers*perWorker)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids := map[uint64]int64{}
	for _, r := range results {
		if prev, dup := ids[r.resp.BroadcastId]; dup {
			t.Fatalf("collections %d and %d share broadcast %d", prev, r.coll, r.resp.BroadcastId)
		}
		ids[r.resp.BroadcastId] = r.coll
		info, err := c.GetBroadcast(ctx, r.resp.BroadcastId)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != "TOMBSTONE" || len(info.Acked) != len(info.Vchannels) {
			t.Fatalf("broadcast %d: state %s, %d of %d acked", info.BroadcastId, info.State, len(info.Acked), len(info.Vchannels))
		}
		colls, err := c.ListVirtualChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE, r.coll)
		if err != nil || len(colls) != 1 || len(colls[0].Vchannels) != 2 {
			t.Fatalf("collection %d after its CreateCollection callback: %v %v", r.coll, colls, err)
		}
		// Exactly one copy in each target's WAL, at the acked position.
		for _, v := range info.Vchannels {
			recs, err := wal.ReadAll(l.WALDir(), vocab.PChannelOf(v), v, 0)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, rec := range recs {
				if rec.BroadcastID == info.BroadcastId {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("broadcast %d appears %d times in %s", info.BroadcastId, n, v)
			}
		}
	}

	// The same key after the failover: the original task, not a new one.
	again, err := c.Broadcast(ctx, broadcastSpec(results[0].coll))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicated || again.BroadcastId != results[0].resp.BroadcastId {
		t.Fatalf("retry of collection %d: id %d duplicated=%v, want id %d duplicated",
			results[0].coll, again.BroadcastId, again.Duplicated, results[0].resp.BroadcastId)
	}
}

// TestInFlightBroadcastCompletesWithoutItsCaller: a broadcast is started
// and the leader is killed at once; nobody retries. The new leader finds
// the task in the log and completes it.
func TestInFlightBroadcastCompletesWithoutItsCaller(t *testing.T) {
	l, c := startChannelCluster(t, 2)
	cs := dialAll(t, l)
	waitPlacement(t, c, 30*time.Second, "all channels assigned", func(ps map[string]placement) bool { return allAssigned(ps, 0) })
	leader := leaderIndex(t, l, cs, -1)
	// Talk to the leader only, once, so the call dies with it.
	lc, err := client.New(context.Background(), secured(l, client.Config{Endpoints: []string{l.Members()[leader].GRPCAddr}, MaxRetries: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = lc.Broadcast(ctx, broadcastSpec(7))
	}()
	// Wait until the task is persisted, then kill the leader.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var id uint64
	for id == 0 {
		if ctx.Err() != nil {
			t.Fatal("the broadcast was never persisted")
		}
		bs, err := lc.ListBroadcasts(ctx, false, 10)
		if err == nil && len(bs) > 0 {
			id = bs[0].BroadcastId
		}
	}
	if err := l.Kill(leader); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := c.GetBroadcast(ctx, id)
		if err == nil && info.State == "TOMBSTONE" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("broadcast %d never completed after the leader died: %v %v", id, info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	colls, err := c.ListVirtualChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE, 7)
	if err != nil || len(colls) != 1 {
		t.Fatalf("the callback did not run: %v %v", colls, err)
	}
}

func broadcastSpec(coll int64) client.BroadcastSpec {
	return client.BroadcastSpec{
		MessageType: vocab.MsgCreateCollection,
		Payload:     client.CreateCollectionPayload(coll, 2),
		Idempotency: &client.IdempotencyKey{Scope: "COLLECTION", ScopeID: coll, Key: "create"},
	}
}
