package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// TSO the way Milvus's rootcoord allocates timestamps (and, with a second
// instance, IDs): a hybrid timestamp physical ms << 18 | logical held in
// memory; every 50 ms the physical part moves to the wall clock, and when
// it comes within 1 ms of the persisted upper bound a new bound (now + 3 s)
// is saved to etcd with a compare on the previous one. A restarted
// allocator starts above the saved bound, so values never repeat.
const (
	logicalBits    = 18
	maxLogical     = 1 << logicalBits
	tsoUpdateEvery = 50 * time.Millisecond
	tsoSaveWindow  = 3 * time.Second
)

type tso struct {
	kv  *store
	key string

	mu       sync.Mutex
	physical int64 // ms
	logical  int64
	saved    int64 // ms, the persisted upper bound
	savedRaw []byte
}

func newTSO(kv *store, key string) (*tso, error) {
	t := &tso{kv: kv, key: key}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kv.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("tso %s: %w", key, err)
	}
	var last int64
	if len(resp.Kvs) == 1 {
		t.savedRaw = resp.Kvs[0].Value
		last = int64(binary.BigEndian.Uint64(t.savedRaw))
	}
	now := max(time.Now().UnixMilli(), last+1)
	if err := t.persist(ctx, now+tsoSaveWindow.Milliseconds()); err != nil {
		return nil, err
	}
	t.physical = now
	return t, nil
}

// persist saves a new upper bound, comparing the value stored before.
func (t *tso) persist(ctx context.Context, bound int64) error {
	raw := binary.BigEndian.AppendUint64(nil, uint64(bound))
	var cmp clientv3.Cmp
	if t.savedRaw == nil {
		cmp = clientv3.Compare(clientv3.CreateRevision(t.key), "=", 0)
	} else {
		cmp = clientv3.Compare(clientv3.Value(t.key), "=", string(t.savedRaw))
	}
	if err := t.kv.txn(ctx, []clientv3.Cmp{cmp}, []clientv3.Op{clientv3.OpPut(t.key, string(raw))}); err != nil {
		return fmt.Errorf("tso %s: save bound: %w", t.key, err)
	}
	t.saved, t.savedRaw = bound, raw
	return nil
}

// run moves the physical part forward every 50 ms until stop closes.
func (t *tso) run(stop <-chan struct{}) {
	tick := time.NewTicker(tsoUpdateEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			t.update()
		}
	}
}

func (t *tso) update() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now().UnixMilli()
	if now > t.physical {
		t.physical, t.logical = now, 0
	} else if t.logical > maxLogical/2 { // logical part running out: borrow the next ms
		t.physical, t.logical = t.physical+1, 0
	}
	if t.saved-t.physical <= 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.persist(ctx, t.physical+tsoSaveWindow.Milliseconds()); err != nil {
			// Without a new bound nothing more may be handed out; alloc
			// refuses until a later update succeeds.
			t.physical = t.saved
		}
	}
}

// alloc returns the first of count consecutive values.
func (t *tso) alloc(count uint32) (uint64, error) {
	if count == 0 || count > maxLogical/4 {
		return 0, status.Errorf(codes.InvalidArgument, "count must be in 1..%d", maxLogical/4)
	}
	for range 200 { // bounded wait for the next update (about 10 s)
		t.mu.Lock()
		if t.physical < t.saved && t.logical+int64(count) < maxLogical {
			first := uint64(t.physical)<<logicalBits | uint64(t.logical)
			t.logical += int64(count)
			t.mu.Unlock()
			return first, nil
		}
		t.mu.Unlock()
		time.Sleep(tsoUpdateEvery / 10)
	}
	return 0, status.Error(codes.Unavailable, "tso: no window")
}

type allocServer struct {
	coordpb.UnimplementedAllocatorServer
	ts, ids *tso
}

func (a *allocServer) AllocTimestamp(_ context.Context, r *coordpb.AllocTimestampRequest) (*coordpb.AllocTimestampResponse, error) {
	first, err := a.ts.alloc(r.Count)
	if err != nil {
		return nil, err
	}
	return &coordpb.AllocTimestampResponse{First: first, Count: r.Count}, nil
}

func (a *allocServer) AllocID(_ context.Context, r *coordpb.AllocIDRequest) (*coordpb.AllocIDResponse, error) {
	first, err := a.ids.alloc(r.Count)
	if err != nil {
		return nil, err
	}
	return &coordpb.AllocIDResponse{First: first, Count: r.Count}, nil
}

type clusterServer struct {
	coordpb.UnimplementedClusterServer
	kv *store
}

// Status answers from memory (the no-op RPC on this transport).
func (c *clusterServer) Status(context.Context, *coordpb.StatusRequest) (*coordpb.StatusResponse, error) {
	return &coordpb.StatusResponse{NodeId: "etcdcoord", State: "Leader", LeaderId: "etcdcoord", Term: 1, EstablishedTerm: 1,
		AppliedIndex: uint64(c.kv.txns.Load())}, nil
}

type diagnosticsServer struct {
	coordpb.UnimplementedDiagnosticsServer
}

// GetLogLevel is the no-op RPC: a constant from memory, as on coordd.
func (diagnosticsServer) GetLogLevel(context.Context, *coordpb.GetLogLevelRequest) (*coordpb.LogLevelResponse, error) {
	return &coordpb.LogLevelResponse{NodeId: "etcdcoord", Level: "warn"}, nil
}
