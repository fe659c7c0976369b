package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// Streaming node sessions, the way Milvus's sessionutil keeps them: a node
// takes an ID from a counter key with a compare-and-swap transaction, then
// puts its session key (if absent) under a lease of snTTL that it keeps
// alive; leaving revokes the lease, which deletes the key, and a node that
// stops keeping it alive loses the key when the lease expires. The
// coordinator learns about joins and leaves only from an etcd watch on the
// session prefix, as streamingcoord's node discoverer does.
//
// In Milvus the node itself writes these keys and keeps its lease alive;
// here it does so through this process's StreamingNodeRegistry RPCs
// (coordd's API, so the benchmark drives both systems with the same client
// code): RegisterStreamingNode = the ID transaction, a lease grant and the
// session transaction; Heartbeat = one lease keep-alive; Deregister = one
// lease revoke. The etcd work per call is the same as Milvus's node does.

const (
	snSessionPrefix = "session/streamingnode-"
	snIDKey         = "session/id/streamingnode"
	snTTL           = 10 // seconds, coordd's default --node-ttl
)

func snSessionKey(id uint64) string { return snSessionPrefix + strconv.FormatUint(id, 10) }

type snSession struct {
	lease clientv3.LeaseID
	epoch uint64
}

// registry serves StreamingNodeRegistry over etcd sessions.
type registry struct {
	coordpb.UnimplementedStreamingNodeRegistryServer
	kv  *store
	asg *assigner

	mu       sync.Mutex
	sessions map[uint64]snSession
}

func newRegistry(kv *store, asg *assigner) *registry {
	return &registry{kv: kv, asg: asg, sessions: map[uint64]snSession{}}
}

// nextID is sessionutil's server ID: read the counter, CAS it one up.
// The counter starts at 1, so node 1 (the data path's fixed owner, see
// catalog.go) is never a streaming node session.
func (r *registry) nextID(ctx context.Context) (uint64, error) {
	for {
		resp, err := r.kv.cli.Get(ctx, snIDKey)
		if err != nil {
			return 0, fmt.Errorf("read node id counter: %w", err)
		}
		cur, cmp := uint64(1), clientv3.Compare(clientv3.CreateRevision(snIDKey), "=", 0)
		if len(resp.Kvs) == 1 {
			if cur, err = strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64); err != nil {
				return 0, fmt.Errorf("node id counter %q: %w", resp.Kvs[0].Value, err)
			}
			cmp = clientv3.Compare(clientv3.Value(snIDKey), "=", string(resp.Kvs[0].Value))
		}
		next := cur + 1
		r.kv.txns.Add(1)
		t, err := r.kv.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(snIDKey, strconv.FormatUint(next, 10))).Commit()
		if err != nil {
			return 0, fmt.Errorf("node id txn: %w", err)
		}
		if t.Succeeded {
			return next, nil
		}
	}
}

func (r *registry) RegisterStreamingNode(ctx context.Context, req *coordpb.RegisterStreamingNodeRequest) (*coordpb.RegisterStreamingNodeResponse, error) {
	if req.Address == "" {
		return nil, status.Error(codes.InvalidArgument, "address is required")
	}
	id, err := r.nextID(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	lease, err := r.kv.cli.Grant(ctx, snTTL)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "session lease: %v", err)
	}
	val, _ := proto.Marshal(&coordpb.StreamingNode{Id: id, Address: req.Address, ResourceGroup: req.ResourceGroup,
		RegisteredUnixMs: time.Now().UnixMilli()})
	key := snSessionKey(id)
	r.kv.txns.Add(1)
	t, err := r.kv.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "session txn: %v", err)
	}
	if !t.Succeeded {
		return nil, status.Errorf(codes.Aborted, "session key %s exists", key)
	}
	epoch := uint64(t.Header.Revision) // the key's create revision
	r.mu.Lock()
	r.sessions[id] = snSession{lease: lease.ID, epoch: epoch}
	r.mu.Unlock()
	return &coordpb.RegisterStreamingNodeResponse{NodeId: id, Epoch: epoch, RegisteredVersion: r.asg.currentVersion()}, nil
}

func (r *registry) session(id, epoch uint64) (snSession, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sessions[id]
	return s, ok && s.epoch == epoch
}

func (r *registry) Heartbeat(ctx context.Context, req *coordpb.HeartbeatRequest) (*coordpb.HeartbeatResponse, error) {
	s, ok := r.session(req.NodeId, req.Epoch)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "streaming node %d epoch %d has no session; register again", req.NodeId, req.Epoch)
	}
	if _, err := r.kv.cli.KeepAliveOnce(ctx, s.lease); err != nil {
		return nil, status.Errorf(codes.NotFound, "streaming node %d: session lease: %v", req.NodeId, err)
	}
	return &coordpb.HeartbeatResponse{CoordTerm: 1, State: "UP", TtlMs: snTTL * 1000}, nil
}

func (r *registry) Deregister(ctx context.Context, req *coordpb.NodeSessionRequest) (*coordpb.NodeSessionResponse, error) {
	s, ok := r.session(req.NodeId, req.Epoch)
	if !ok {
		return &coordpb.NodeSessionResponse{State: "DOWN"}, nil
	}
	if _, err := r.kv.cli.Revoke(ctx, s.lease); err != nil {
		return nil, status.Errorf(codes.Unavailable, "revoke session of node %d: %v", req.NodeId, err)
	}
	r.mu.Lock()
	delete(r.sessions, req.NodeId)
	r.mu.Unlock()
	return &coordpb.NodeSessionResponse{State: "DOWN"}, nil
}

// watchSessions feeds session puts and deletes to the assigner until ctx
// ends: the sessions present at start, then the watch from the next
// revision (with re-watch after a broken watch, from where it stopped).
func watchSessions(ctx context.Context, cli *clientv3.Client, asg *assigner) error {
	resp, err := cli.Get(ctx, snSessionPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	for _, kv := range resp.Kvs {
		sessionEvent(asg, string(kv.Key), kv.Value, uint64(kv.CreateRevision), false)
	}
	from := resp.Header.Revision + 1
	go func() {
		for ctx.Err() == nil {
			for w := range cli.Watch(ctx, snSessionPrefix, clientv3.WithPrefix(), clientv3.WithRev(from)) {
				if w.Err() != nil {
					log.Printf("etcdcoord: session watch: %v", w.Err())
					break
				}
				for _, ev := range w.Events {
					sessionEvent(asg, string(ev.Kv.Key), ev.Kv.Value, uint64(ev.Kv.CreateRevision), ev.Type == clientv3.EventTypeDelete)
					from = ev.Kv.ModRevision + 1
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return nil
}

func sessionEvent(asg *assigner, key string, val []byte, createRev uint64, deleted bool) {
	id, err := strconv.ParseUint(strings.TrimPrefix(key, snSessionPrefix), 10, 64)
	if err != nil {
		return
	}
	if deleted {
		asg.nodeDown(id)
		return
	}
	n := &coordpb.StreamingNode{}
	if err := proto.Unmarshal(val, n); err != nil {
		log.Printf("etcdcoord: session %s: %v", key, err)
		return
	}
	n.Id, n.Epoch, n.State = id, createRev, "UP"
	asg.nodeUp(n)
}
