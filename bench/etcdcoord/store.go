package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxTxnOps is how many operations go into one etcd transaction; larger
// batches are cut into several (Milvus's metastore.maxEtcdTxnNum default).
const maxTxnOps = 64

// sessionKey is this coordinator's session: written once under a lease at
// start, and every transaction compares its revision, so a coordinator
// that lost its session (another one took over) cannot write. This is how
// an active-standby coordinator fences its writes to etcd.
const sessionKey = "session/etcdcoord"

// errFenced: the session key changed; this coordinator must stop.
var errFenced = errors.New("etcdcoord: session lost (fenced)")

// errConflict: a compare-and-swap found a different revision or value.
var errConflict = errors.New("etcdcoord: conflict")

// store is the etcd side: one client shared by every request (gRPC
// multiplexes every call over its connection), a session revision, and
// counters of what reached etcd.
type store struct {
	cli        *clientv3.Client
	sessionRev int64
	txns, ops  atomic.Int64
}

func newStore(ctx context.Context, cli *clientv3.Client) (*store, error) {
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		return nil, fmt.Errorf("etcd lease: %w", err)
	}
	keep, err := cli.KeepAlive(context.Background(), lease.ID)
	if err != nil {
		return nil, fmt.Errorf("etcd keepalive: %w", err)
	}
	go func() {
		for range keep { // drain keep-alive answers until the client closes
		}
	}()
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(sessionKey), "=", 0)).
		Then(clientv3.OpPut(sessionKey, "etcdcoord", clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcd session: %w", err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("etcd session: %s exists: another coordinator is active", sessionKey)
	}
	return &store{cli: cli, sessionRev: resp.Header.Revision}, nil
}

func (s *store) fence() clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(sessionKey), "=", s.sessionRev)
}

// save writes ops fenced by the session, at most maxTxnOps per
// transaction (so a large batch is not atomic as a whole, as in Milvus's
// SaveByBatch).
func (s *store) save(ctx context.Context, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		if err := s.txn(ctx, nil, ops[:n]); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// txn commits one transaction: the session fence plus cmps, then ops.
// errConflict when a compare of cmps failed, errFenced when the session
// did.
func (s *store) txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) error {
	_, err := s.txnRev(ctx, cmps, ops)
	return err
}

// txnRev is txn that also returns the revision the transaction committed
// at (the new mod revision of every key it put).
func (s *store) txnRev(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (int64, error) {
	all := append([]clientv3.Cmp{s.fence()}, cmps...)
	s.txns.Add(1)
	s.ops.Add(int64(len(ops)))
	resp, err := s.cli.Txn(ctx).If(all...).Then(ops...).Else(clientv3.OpGet(sessionKey)).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcd txn: %w", err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 0 || kvs[0].ModRevision != s.sessionRev {
		return 0, errFenced
	}
	return 0, errConflict
}
