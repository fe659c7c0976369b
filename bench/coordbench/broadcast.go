package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
)

// broadcastCell is one (targets, conflicting) measurement.
type broadcastCell struct {
	Targets     int     `json:"targets"`
	Conflicting bool    `json:"conflicting"`
	Ops         int     `json:"ops"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
}

// broadcastTargets lists n targets: the CChannel first, then PChannels.
func broadcastTargets(resp *coordpb.ListPChannelsResponse, n int) []string {
	out := []string{resp.Cchannel}
	skip := resp.Cchannel[:len(resp.Cchannel)-len("_vcchan")]
	for _, p := range resp.Pchannels {
		if len(out) == n {
			break
		}
		if p.Name != skip {
			out = append(out, p.Name)
		}
	}
	return out
}

// broadcasts measures call → callback-done latency at `callers` concurrent
// callers for 1, 16 and 256 targets, with and without conflicting keys,
// then the time from a leader kill until the oldest in-flight task is done.
func broadcasts(l *cluster.Launcher, callers int) (result, []broadcastCell, error) {
	c, err := client.New(context.Background(), client.Config{Endpoints: endpoints(l), RequestTimeout: 60 * time.Second})
	if err != nil {
		return result{}, nil, err
	}
	defer c.Close()
	if _, err := waitSettled(c, 0, 120*time.Second); err != nil {
		return result{}, nil, err
	}
	ctx := context.Background()
	pcs, err := c.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil {
		return result{}, nil, err
	}
	var cells []broadcastCell
	seq := 0
	for _, targets := range []int{1, 16, 256} {
		for _, conflicting := range []bool{false, true} {
			ops := map[int]int{1: 400, 16: 300, 256: 60}[targets]
			tg := broadcastTargets(pcs, targets)
			var mu sync.Mutex
			var lats []time.Duration
			var firstErr error
			var wg sync.WaitGroup
			start := time.Now()
			for w := 0; w < callers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < ops; i += callers {
						mu.Lock()
						seq++
						key := fmt.Sprintf("db:c%d", seq)
						mu.Unlock()
						if conflicting {
							key = "db:hot"
						}
						t0 := time.Now()
						_, err := c.Broadcast(ctx, client.BroadcastSpec{MessageType: "AlterDatabase", Payload: []byte("x"), VChannels: tg,
							ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: key}}})
						mu.Lock()
						if err != nil && firstErr == nil {
							firstErr = err
						}
						if err == nil {
							lats = append(lats, time.Since(t0))
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if firstErr != nil {
				return result{}, nil, fmt.Errorf("%d targets, conflicting=%v: %w", targets, conflicting, firstErr)
			}
			el := time.Since(start)
			sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
			pct := func(p float64) float64 {
				return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))].Microseconds()) / 1000
			}
			cells = append(cells, broadcastCell{Targets: len(tg), Conflicting: conflicting, Ops: len(lats),
				OpsPerSec: float64(len(lats)) / el.Seconds(), P50ms: pct(0.5), P99ms: pct(0.99)})
		}
	}
	kill, err := broadcastLeaderKill(l, c, broadcastTargets(pcs, 16), callers)
	if err != nil {
		return result{}, nil, err
	}
	return result{Clients: callers, MedianMs: kill, Trials: 1}, cells, nil
}

// broadcastLeaderKill keeps callers broadcasting, kills the leader, and
// times until every task created before the kill is a TOMBSTONE.
func broadcastLeaderKill(l *cluster.Launcher, c *client.Client, tg []string, callers int) (float64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 10000; i++ {
				cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
				_, _ = c.Broadcast(cctx, client.BroadcastSpec{MessageType: "AlterDatabase", Payload: []byte("k"), VChannels: tg,
					ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: fmt.Sprintf("db:k%d-%d", w, i)}}})
				ccancel()
			}
		}()
	}
	defer wg.Wait()
	defer cancel()
	time.Sleep(time.Second)
	li, err := leader(l, -1)
	if err != nil {
		return 0, err
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
	pending, err := c.ListBroadcasts(lctx, true, 10000)
	lcancel()
	if err != nil {
		return 0, err
	}
	killed := time.Now()
	if err := l.Kill(li); err != nil {
		return 0, err
	}
	defer l.StartMember(li)
	ids := map[uint64]bool{}
	for _, b := range pending {
		ids[b.BroadcastId] = true
	}
	for len(ids) > 0 {
		if time.Since(killed) > 60*time.Second {
			return 0, fmt.Errorf("%d tasks in flight at the kill never completed", len(ids))
		}
		for id := range ids {
			gctx, gcancel := context.WithTimeout(context.Background(), 2*time.Second)
			info, err := c.GetBroadcast(gctx, id)
			gcancel()
			if err == nil && info.State == "TOMBSTONE" {
				delete(ids, id)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return float64(time.Since(killed).Microseconds()) / 1000, nil
}
