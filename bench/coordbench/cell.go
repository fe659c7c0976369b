package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// cellStats is one closed-loop run of one operation on one system.
type cellStats struct {
	Ops       int
	Errors    int
	OpsPerSec float64
	P50ms     float64
	P99ms     float64
	MaxMs     float64
	Elapsed   time.Duration
	FirstErr  error
}

// clientOp is the call one client repeats: i counts that client's calls.
type clientOp func(ctx context.Context, i int) error

// runCell runs clients closed-loop, each calling newOp(client)'s op until
// the duration is over or maxOps calls were made in all, after a warm-up
// of one second (not counted); before is called between the two. Every
// call has the given deadline.
func runCell(clients int, duration, callTimeout time.Duration, maxOps int, newOp func(client int) clientOp, before func()) cellStats {
	ops := make([]clientOp, clients)
	for c := range ops {
		ops[c] = newOp(c)
	}
	calls := make([]int, clients) // per client, carried from the warm-up into the run
	pass := func(d time.Duration, limit int) cellStats {
		var mu sync.Mutex
		var lats []time.Duration
		var st cellStats
		var wg sync.WaitGroup
		start := time.Now()
		stopAt := start.Add(d)
		perClient := max(1, limit/clients)
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := make([]time.Duration, 0, 1024)
				errs := 0
				var first error
				for n := 0; n < perClient && time.Now().Before(stopAt); n++ {
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					t0 := time.Now()
					err := ops[c](ctx, calls[c])
					cancel()
					calls[c]++
					if err != nil {
						if first == nil {
							first = err
						}
						errs++
						continue
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lats = append(lats, local...)
				st.Errors += errs
				if st.FirstErr == nil {
					st.FirstErr = first
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		st.Elapsed = time.Since(start)
		st.Ops = len(lats)
		if len(lats) == 0 {
			return st
		}
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		pct := func(p float64) float64 { return msOf(lats[min(len(lats)-1, int(p*float64(len(lats))))]) }
		st.OpsPerSec = float64(len(lats)) / st.Elapsed.Seconds()
		st.P50ms, st.P99ms, st.MaxMs = pct(0.50), pct(0.99), msOf(lats[len(lats)-1])
		return st
	}
	pass(time.Second, maxOps)
	if before != nil {
		before()
	}
	st := pass(duration, maxOps)
	if st.FirstErr != nil {
		fmt.Fprintf(os.Stderr, "coordbench: %d errors, first: %v\n", st.Errors, st.FirstErr)
	}
	return st
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
