package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/cluster"
)

// failover: per trial, SIGKILL the leader and time until a committed write
// succeeds through any survivor; then restart the member and let it catch up.
func failover(l *cluster.Launcher, trials int) (result, error) {
	var conns []*grpc.ClientConn
	for _, m := range l.Members() {
		c, err := dial(m.GRPCAddr)
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		conns = append(conns, c)
	}
	var times []float64
	for t := 0; t < trials; t++ {
		li, err := leader(l, -1)
		if err != nil {
			return result{}, err
		}
		killed := time.Now()
		if err := l.Kill(li); err != nil {
			return result{}, err
		}
		ok := false
		for time.Since(killed) < 30*time.Second && !ok {
			for i, c := range conns {
				if i == li {
					continue
				}
				self := l.Members()[i]
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				err := op("commit", c, self)(ctx)
				cancel()
				if err == nil {
					ok = true
					break
				}
			}
			if !ok {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if !ok {
			return result{}, fmt.Errorf("trial %d: no write within 30s of the kill", t+1)
		}
		times = append(times, float64(time.Since(killed).Microseconds())/1000)
		if err := l.StartMember(li); err != nil {
			return result{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = l.WaitReady(ctx, li, 30*time.Second)
		cancel()
		if err != nil {
			return result{}, err
		}
		time.Sleep(time.Second) // let the restarted member settle before the next kill
	}
	sorted := append([]float64(nil), times...)
	sort.Float64s(sorted)
	return result{Trials: trials, MedianMs: median(sorted), MaxMs: sorted[len(sorted)-1], TrialsMs: times}, nil
}
