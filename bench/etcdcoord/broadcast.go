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
// the message is appended to every target's WAL (concurrently), each
// target's ack is saved to the task as it arrives, and the finished task
// is saved as a TOMBSTONE before the keys are released: one etcd
// transaction per task state change.
type broadcaster struct {
	coordpb.UnimplementedBroadcasterServer
	kv       *store
	ids      *tso
	wal      *wal
	cchannel string

	mu    sync.Mutex
	locks map[string]*sync.RWMutex
}

func newBroadcaster(kv *store, ids *tso, w *wal, cat *catalog) *broadcaster {
	return &broadcaster{kv: kv, ids: ids, wal: w, cchannel: cat.pchannels[0] + "_vcchan", locks: map[string]*sync.RWMutex{}}
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
	var mu sync.Mutex // the task's: acks are saved one at a time
	var firstErr error
	var wg sync.WaitGroup
	resp := &coordpb.BroadcastResponse{BroadcastId: id, LockWaitMs: waited.Milliseconds()}
	for _, ch := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off, err := b.wal.append(ch, r.Payload)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				cp := &coordpb.Checkpoint{Vchannel: ch, Term: pchannelTerm, Offset: off, TimeTick: id}
				task.Acked = append(task.Acked, cp)
				err = b.kv.txn(ctx, nil, []clientv3.Op{b.taskPut(task, r.Payload)})
				resp.AppendResults = append(resp.AppendResults, cp)
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, status.Errorf(codes.Unavailable, "broadcast %d: %v", id, firstErr)
	}
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
