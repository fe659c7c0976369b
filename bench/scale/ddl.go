package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ddlResult is the bulk DDL: n CreateCollection broadcasts (one shard
// each) from clients callers, then a DropCollection of each, with the
// leader's state size (coordd_state_bytes) before, between and after.
type ddlResult struct {
	N, Clients                      int
	Create, Drop                    time.Duration
	CreateSt, DropSt                summary
	StateBefore, StateMid, StateEnd float64 // MiB
	// StatePruned is the state once the dropped VChannels were forgotten
	// (after the members' --segment-dropped-retention: the leader answers
	// NotFound for them), PruneWait how long after the drops that took; 0
	// when it did not within pruneWait.
	StatePruned    float64
	PruneWait      time.Duration
	RSSMid, RSSEnd map[string]float64
}

// pruneWait bounds the wait for the drops' records to be forgotten: with
// -member-flags "--segment-dropped-retention 1s" the flush rounds forget
// 4,096 dropped VChannels each.
const pruneWait = 5 * time.Minute

func dirOf(m *member) string { return filepath.Dir(m.dir) }

// leaderGauge reads one metric of the established leader.
func (e *env) leaderGauge(ctx context.Context, name string) float64 {
	lead, _, err := e.leader(ctx, time.Minute)
	if err != nil {
		return -1
	}
	mt, err := lead.metrics()
	if err != nil {
		return -1
	}
	return mt[name]
}

func (e *env) rssAll() map[string]float64 {
	out := map[string]float64{}
	for _, m := range e.running() {
		out[m.id] = rssMiB(m.pid())
	}
	return out
}

func (e *env) bulkDDL(ctx context.Context, n, clients int, base int64) ddlResult {
	r := ddlResult{N: n, Clients: clients}
	r.StateBefore = e.leaderGauge(ctx, "coordd_state_bytes") / (1 << 20)
	targets := make([][]string, n)
	run := func(st *opStats, op func(ctx context.Context, i int) error) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		t0 := time.Now()
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= n || ctx.Err() != nil {
						return
					}
					t := time.Now()
					err := retryUnavailable(ctx, func(ctx context.Context) error { return op(ctx, i) })
					if err != nil {
						st.fail(err)
						continue
					}
					st.ok(time.Since(t), 1)
				}
			}()
		}
		done := make(chan struct{})
		go func() {
			t := time.NewTicker(15 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					s := st.summary()
					fmt.Printf("    %d of %d done (%d errors), %.0f s\n", s.N, n, s.Errs, time.Since(t0).Seconds())
				}
			}
		}()
		wg.Wait()
		close(done)
		return time.Since(t0)
	}
	var cst, dst opStats
	r.Create = run(&cst, func(ctx context.Context, i int) error {
		t, err := e.createCollection(ctx, e.leaderConn(), base+int64(i), 1)
		if err == nil {
			targets[i] = t
		}
		return err
	})
	r.CreateSt = cst.summary()
	r.StateMid = e.leaderGauge(ctx, "coordd_state_bytes") / (1 << 20)
	r.RSSMid = e.rssAll()
	fmt.Printf("  created %d collections in %.1f s (p99 %.1f ms, %d errors); state %.1f -> %.1f MiB\n",
		r.CreateSt.N, r.Create.Seconds(), ms(r.CreateSt.P99), r.CreateSt.Errs, r.StateBefore, r.StateMid)
	r.Drop = run(&dst, func(ctx context.Context, i int) error {
		if targets[i] == nil {
			return nil
		}
		return e.dropCollection(ctx, e.leaderConn(), base+int64(i), targets[i])
	})
	r.DropSt = dst.summary()
	r.StateEnd = e.leaderGauge(ctx, "coordd_state_bytes") / (1 << 20)
	r.RSSEnd = e.rssAll()
	fmt.Printf("  dropped them in %.1f s (p99 %.1f ms, %d errors); state %.1f MiB\n",
		r.Drop.Seconds(), ms(r.DropSt.P99), r.DropSt.Errs, r.StateEnd)
	// The dropped VChannels are forgotten oldest drop first: once the
	// first, middle and last of them are unknown to the leader, so are
	// the others.
	var samples []string
	for _, i := range []int{0, n / 2, n - 1} {
		if i < 0 || i >= n {
			continue
		}
		for _, t := range targets[i] { // the collection's VChannel, not the control channel
			if c, ok := vocab.CollectionOfVChannel(t); ok && c == base+int64(i) {
				samples = append(samples, t)
				break
			}
		}
	}
	t0 := time.Now()
	for len(samples) > 0 && time.Since(t0) < pruneWait && ctx.Err() == nil {
		if e.allForgotten(ctx, samples) {
			r.StatePruned, r.PruneWait = e.leaderGauge(ctx, "coordd_state_bytes")/(1<<20), time.Since(t0)
			fmt.Printf("  the dropped VChannels were forgotten %.1f s after the drops; state %.1f MiB\n", r.PruneWait.Seconds(), r.StatePruned)
			break
		}
		time.Sleep(2 * time.Second)
	}
	return r
}

// allForgotten: the leader answers NotFound to GetRecoveryInfo for every
// one of vchs (a dropped VChannel it still remembers answers Dropped).
func (e *env) allForgotten(ctx context.Context, vchs []string) bool {
	for _, v := range vchs {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := coordpb.NewDataCoordClient(e.leaderConn()).GetRecoveryInfo(cctx, &coordpb.GetRecoveryInfoRequest{Vchannel: v})
		cancel()
		if status.Code(err) != codes.NotFound {
			return false
		}
	}
	return true
}
