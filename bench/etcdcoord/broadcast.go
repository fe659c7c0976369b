package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// broadcaster is Milvus's streamingcoord broadcaster: the caller's
// resource keys are locked in memory, the task is saved to etcd PENDING,
// the message is appended to every target's WAL (concurrently), the
// targets' acks are saved to the task as they arrive (batched: acks that
// arrive during a save share the next one, as the newest Milvus does; or
// one transaction per ack, see ackLog), and the finished task is saved as
// a TOMBSTONE before the keys are released.
type broadcaster struct {
	coordpb.UnimplementedBroadcasterServer
	kv       *store
	ids      *tso
	wal      *wal
	cchannel string
	// batchAcks: acks arriving during a save share the next transaction
	// (-broadcast-ack-batching); false: one transaction per ack.
	batchAcks bool

	mu    sync.Mutex
	locks map[string]*sync.RWMutex
}

func newBroadcaster(kv *store, ids *tso, w *wal, cat *catalog, batchAcks bool) *broadcaster {
	return &broadcaster{kv: kv, ids: ids, wal: w, cchannel: cat.pchannels[0] + "_vcchan", batchAcks: batchAcks, locks: map[string]*sync.RWMutex{}}
}

func (b *broadcaster) lock(keys []*coordpb.ResourceKey) func() {
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, func(x, y *coordpb.ResourceKey) int { return cmpString(x.Domain+"/"+x.Key, y.Domain+"/"+y.Key) })
	var unlock []func()
	for i, k := range sorted {
		if i > 0 && k.Domain == sorted[i-1].Domain && k.Key == sorted[i-1].Key {
			continue
		}
		b.mu.Lock()
		l := b.locks[k.Domain+"/"+k.Key]
		if l == nil {
			l = &sync.RWMutex{}
			b.locks[k.Domain+"/"+k.Key] = l
		}
		b.mu.Unlock()
		if k.Shared {
			l.RLock()
			unlock = append(unlock, l.RUnlock)
		} else {
			l.Lock()
			unlock = append(unlock, l.Unlock)
		}
	}
	return func() {
		for _, u := range unlock {
			u()
		}
	}
}

func taskKey(id uint64) string { return fmt.Sprintf("streamingcoord-meta/broadcast-task/%d", id) }

func (b *broadcaster) Broadcast(ctx context.Context, r *coordpb.BroadcastRequest) (*coordpb.BroadcastResponse, error) {
	if r.MessageType == "" || len(r.Vchannels) == 0 {
		return nil, status.Error(codes.InvalidArgument, "message_type and vchannels are required")
	}
	targets := slices.Clone(r.Vchannels)
	if !slices.Contains(targets, b.cchannel) {
		targets = append(targets, b.cchannel)
	}
	t0 := time.Now()
	unlock := b.lock(r.ResourceKeys)
	defer unlock()
	waited := time.Since(t0)
	id, err := b.ids.alloc(1)
	if err != nil {
		return nil, err
	}
	task := &coordpb.BroadcastInfo{BroadcastId: id, MessageType: r.MessageType, State: "PENDING", ResourceKeys: r.ResourceKeys,
		Vchannels: targets, CreatedUnixMs: time.Now().UnixMilli(), PayloadBytes: uint32(len(r.Payload))}
	// The task record carries the payload (a restarted broadcaster
	// re-appends from it), as Milvus's does.
	if err := b.kv.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(taskKey(id)), "=", 0)},
		[]clientv3.Op{b.taskPut(task, r.Payload)}); err != nil {
		return nil, status.Errorf(codes.Unavailable, "save task: %v", err)
	}
	// The saver is one goroutine at a time (ackLog), so it owns task
	// until wg.Wait.
	acks := newAckLog(b.batchAcks, func(acked []*coordpb.Checkpoint) error {
		task.Acked = acked
		return b.kv.txn(ctx, nil, []clientv3.Op{b.taskPut(task, r.Payload)})
	})
	var mu sync.Mutex // firstErr
	var firstErr error
	var wg sync.WaitGroup
	for _, ch := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off, err := b.wal.append(ch, r.Payload)
			if err == nil {
				err = acks.ack(&coordpb.Checkpoint{Vchannel: ch, Term: pchannelTerm, Offset: off, TimeTick: id})
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, status.Errorf(codes.Unavailable, "broadcast %d: %v", id, firstErr)
	}
	resp := &coordpb.BroadcastResponse{BroadcastId: id, LockWaitMs: waited.Milliseconds(), AppendResults: acks.all()}
	task.Acked = resp.AppendResults
	task.State, task.TombstonedUnixMs, task.PayloadBytes = "TOMBSTONE", time.Now().UnixMilli(), 0
	if err := b.kv.txn(ctx, nil, []clientv3.Op{b.taskPut(task, nil)}); err != nil {
		return nil, status.Errorf(codes.Unavailable, "tombstone %d: %v", id, err)
	}
	return resp, nil
}

// taskPut is the task record: the encoded task, then the payload.
func (b *broadcaster) taskPut(task *coordpb.BroadcastInfo, payload []byte) clientv3.Op {
	info, err := proto.Marshal(task)
	if err != nil {
		panic(fmt.Sprintf("marshal task: %v", err)) // only our own well-formed messages get here
	}
	rec := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(info)+len(payload)), uint32(len(info)))
	return clientv3.OpPut(taskKey(task.BroadcastId), string(append(append(rec, info...), payload...)))
}
