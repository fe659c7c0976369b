package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// A broadcast to 64 VChannels records every target's ack in the tombstoned
// task in etcd. With batching the acks take fewer transactions than there
// are targets (the 65 appends run concurrently, each fsynced, while the
// first ack's transaction is in flight); per ack, exactly one each, plus
// the PENDING save and the tombstone.
func TestBroadcastAckTransactions(t *testing.T) {
	cli := startTestEtcd(t)
	var vchs []string
	for i := range 64 {
		vchs = append(vchs, fmt.Sprintf("pc-%d_v0", i))
	}
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := cli.Delete(ctx, sessionKey); err != nil {
				t.Fatal(err)
			}
			kv, err := newStore(ctx, cli)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := newTSO(kv, "tso/id")
			if err != nil {
				t.Fatal(err)
			}
			w, err := newWAL(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			b := &broadcaster{kv: kv, ids: ids, wal: w, cchannel: "pc-0_vcchan", batchAcks: batch, locks: map[string]*sync.RWMutex{}}
			before := kv.txns.Load()
			resp, err := b.Broadcast(ctx, &coordpb.BroadcastRequest{MessageType: "DropCollection", Vchannels: vchs, Payload: []byte("p")})
			if err != nil {
				t.Fatal(err)
			}
			txns := kv.txns.Load() - before
			targets := int64(len(vchs) + 1)
			t.Logf("%d transactions for %d targets", txns, targets)
			if batch && txns >= targets {
				t.Fatalf("batched: %d transactions for %d targets", txns, targets)
			}
			if !batch && txns != targets+2 {
				t.Fatalf("per ack: %d transactions for %d targets, want %d", txns, targets, targets+2)
			}
			got, err := cli.Get(ctx, taskKey(resp.BroadcastId))
			if err != nil || len(got.Kvs) != 1 {
				t.Fatalf("task record: %v %v", got, err)
			}
			rec := got.Kvs[0].Value
			task := &coordpb.BroadcastInfo{}
			if err := proto.Unmarshal(rec[4:4+binary.BigEndian.Uint32(rec)], task); err != nil {
				t.Fatal(err)
			}
			acked := map[string]bool{}
			for _, cp := range task.Acked {
				acked[cp.Vchannel] = true
			}
			if task.State != "TOMBSTONE" || int64(len(acked)) != targets || len(resp.AppendResults) != int(targets) {
				t.Fatalf("task %s with %d distinct acks, %d append results, want %d", task.State, len(acked), len(resp.AppendResults), targets)
			}
		})
	}
}
