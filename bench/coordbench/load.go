package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
)

// op returns the call one client repeats for a workload. "commit" is a
// RegisterMember of the leader's own record: a small (~80 B) UpsertMember
// command committed through raft and applied on every call.
func op(workload string, conn *grpc.ClientConn, self cluster.LocalMember) func(context.Context) error {
	switch workload {
	case "alloc-ts":
		c := coordpb.NewAllocatorClient(conn)
		return func(ctx context.Context) error {
			_, err := c.AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: 1})
			return err
		}
	case "status":
		// A local read with no raft work: the ceiling of the RPC layer on
		// this machine, to put the allocator figures in context.
		c := coordpb.NewClusterClient(conn)
		return func(ctx context.Context) error {
			_, err := c.Status(ctx, &coordpb.StatusRequest{})
			return err
		}
	case "alloc-id":
		c := coordpb.NewAllocatorClient(conn)
		return func(ctx context.Context) error {
			_, err := c.AllocID(ctx, &coordpb.AllocIDRequest{Count: 1})
			return err
		}
	}
	c := coordpb.NewClusterClient(conn)
	req := &coordpb.RegisterMemberRequest{Id: self.ID, RaftAddr: self.RaftAddr, GrpcAddr: self.GRPCAddr, HttpAddr: self.HTTPAddr}
	return func(ctx context.Context) error {
		_, err := c.RegisterMember(ctx, req)
		return err
	}
}

// load runs clients closed-loop against the leader for the duration, after
// a short warm-up.
func load(l *cluster.Launcher, workload string, clients, nconns int, duration time.Duration, maxOps int) (result, error) {
	li, err := leader(l, -1)
	if err != nil {
		return result{}, err
	}
	self := l.Members()[li]
	conns := make([]*grpc.ClientConn, nconns)
	for i := range conns {
		if conns[i], err = dial(self.GRPCAddr); err != nil {
			return result{}, err
		}
		defer conns[i].Close()
	}
	runFor := func(d time.Duration, record bool) ([]time.Duration, int, time.Duration) {
		var mu sync.Mutex
		var lats []time.Duration
		errs := 0
		var wg sync.WaitGroup
		start := time.Now()
		stopAt := start.Add(d)
		perClient := maxOps / clients
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				call := op(workload, conns[c%len(conns)], self)
				local := make([]time.Duration, 0, 4096)
				localErrs := 0
				for i := 0; i < perClient && time.Now().Before(stopAt); i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					t0 := time.Now()
					err := call(ctx)
					cancel()
					if err != nil {
						localErrs++
						continue
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lats = append(lats, local...)
				errs += localErrs
				mu.Unlock()
			}()
		}
		wg.Wait()
		return lats, errs, time.Since(start)
	}
	runFor(time.Second, false) // warm-up: connections, windows, caches
	lats, errs, elapsed := runFor(duration, true)
	if len(lats) == 0 {
		return result{}, fmt.Errorf("%s: no operation succeeded (%d errors)", workload, errs)
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	pct := func(p float64) float64 {
		return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))].Microseconds()) / 1000
	}
	return result{Clients: clients, Ops: len(lats), Errors: errs,
		OpsPerSec: float64(len(lats)) / elapsed.Seconds(), P50ms: pct(0.50), P99ms: pct(0.99)}, nil
}
