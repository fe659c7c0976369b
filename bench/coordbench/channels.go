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

func newClient(l *cluster.Launcher) (*client.Client, error) {
	return client.New(context.Background(), client.Config{Endpoints: endpoints(l), RequestTimeout: 10 * time.Second})
}

func endpoints(l *cluster.Launcher) []string {
	var eps []string
	for _, m := range l.Members() {
		eps = append(eps, m.GRPCAddr)
	}
	return eps
}

// settled reports whether every PChannel is ASSIGNED (optionally avoiding a
// node), with the per-node counts.
func settled(ctx context.Context, c *client.Client, avoid uint64) (bool, map[uint64]int, error) {
	resp, err := c.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil {
		return false, nil, err
	}
	per := map[uint64]int{}
	ok := len(resp.Pchannels) > 0
	for _, p := range resp.Pchannels {
		if p.State != "ASSIGNED" || (avoid != 0 && p.NodeId == avoid) {
			ok = false
		}
		per[p.NodeId]++
	}
	return ok, per, nil
}

func waitSettled(c *client.Client, avoid uint64, timeout time.Duration) (map[uint64]int, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ok, per, err := settled(ctx, c, avoid)
		cancel()
		if err == nil && ok {
			return per, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("channels not settled within %v", timeout)
}

// nodeOf maps a launcher streaming node to its registered node ID (the
// live registration at its address).
func nodeOf(c *client.Client, addr string) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.ListNodes(ctx, coordpb.ReadConsistency_LINEARIZABLE, false)
	if err != nil {
		return 0, err
	}
	for _, n := range nodes {
		if n.Address == addr {
			return n.Id, nil
		}
	}
	return 0, fmt.Errorf("no live node at %s", addr)
}

// snFailover: SIGKILL the streaming node holding channels; time until every
// PChannel is ASSIGNED to a survivor. Then restart it and wait until the
// balancer has given it channels back, for the next trial.
func snFailover(l *cluster.Launcher, trials int, ttl time.Duration) (result, error) {
	c, err := newClient(l)
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	if _, err := waitSettled(c, 0, 60*time.Second); err != nil {
		return result{}, err
	}
	var times []float64
	for t := 0; t < trials; t++ {
		victim := t % len(l.StreamingNodes())
		id, err := nodeOf(c, l.StreamingNodes()[victim].Addr)
		if err != nil {
			return result{}, err
		}
		// Wait until the victim holds channels (after a restart the
		// balancer moves some back).
		deadline := time.Now().Add(60 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ok, per, err := settled(ctx, c, 0)
			cancel()
			if err == nil && ok && per[id] > 0 {
				break
			}
			if time.Now().After(deadline) {
				return result{}, fmt.Errorf("trial %d: node %d never got channels", t+1, id)
			}
			time.Sleep(50 * time.Millisecond)
		}
		killed := time.Now()
		if err := l.KillStreamingNode(victim); err != nil {
			return result{}, err
		}
		if _, err := waitSettled(c, id, 60*time.Second); err != nil {
			return result{}, fmt.Errorf("trial %d: %w", t+1, err)
		}
		times = append(times, float64(time.Since(killed).Microseconds())/1000)
		if err := l.StartStreamingNode(victim); err != nil {
			return result{}, err
		}
		// The restarted process registers once the old session is judged
		// dead; wait for its new registration.
		for time.Now().Before(killed.Add(60 * time.Second)) {
			if nid, err := nodeOf(c, l.StreamingNodes()[victim].Addr); err == nil && nid != id {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	sorted := append([]float64(nil), times...)
	sort.Float64s(sorted)
	return result{Trials: trials, MedianMs: median(sorted), MaxMs: sorted[len(sorted)-1], TrialsMs: times,
		TTLms: ttl.Milliseconds(), PChannels: 16, Nodes: 2}, nil
}

// balanceFromScratch starts n streaming nodes against a cluster with no
// node yet and times until every PChannel is ASSIGNED.
func balanceFromScratch(l *cluster.Launcher, cfg cluster.LauncherConfig, n, pchannels int) (result, error) {
	c, err := newClient(l)
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	cfg.StreamingNodes = n
	sns := cluster.NewLauncher(cfg) // same ports and data dir: only its streaming nodes are started
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := sns.StartStreamingNode(i); err != nil {
			return result{}, err
		}
	}
	defer sns.Stop()
	per, err := waitSettled(c, 0, 120*time.Second)
	if err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	mx, mn := 0, 1<<30
	for _, k := range per {
		mx, mn = max(mx, k), min(mn, k)
	}
	return result{PChannels: pchannels, Nodes: len(per), MaxPerNode: mx, MinPerNode: mn, AllAssigned: true,
		MedianMs: float64(elapsed.Microseconds()) / 1000, Trials: 1}, nil
}

// watchers opens w assignment watchers spread over the members, then per
// trial commits a change (a vchannel allocation bumps the version) and
// times until the last watcher holds the new version.
func watchers(l *cluster.Launcher, w, trials int) (result, error) {
	eps := endpoints(l)
	var clients []*client.Client
	for _, ep := range eps {
		c, err := client.New(context.Background(), client.Config{Endpoints: []string{ep}})
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		clients = append(clients, c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws := make([]*client.Watcher, w)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = clients[i%len(clients)].NewWatcher()
		wg.Add(1)
		go func() { defer wg.Done(); _ = ws[i].Run(ctx) }()
	}
	defer wg.Wait()
	defer cancel()
	admin := clients[0]
	var times []float64
	for t := 0; t < trials; t++ {
		// Everyone holds the current version first.
		ctxT, cancelT := context.WithTimeout(ctx, 60*time.Second)
		resp, err := admin.ListPChannels(ctxT, coordpb.ReadConsistency_LINEARIZABLE)
		if err != nil {
			cancelT()
			return result{}, err
		}
		cur := client.Version{Global: resp.Version.GetGlobal(), Local: resp.Version.GetLocal()}
		if err := waitAll(ctxT, ws, cur); err != nil {
			cancelT()
			return result{}, fmt.Errorf("trial %d: watchers not at the base version: %w", t+1, err)
		}
		if _, err := admin.AllocVirtualChannels(ctxT, int64(1000+t), 1, ""); err != nil {
			cancelT()
			return result{}, err
		}
		committed := time.Now()
		// The allocation is the only change, so it bumps Local by one.
		if err := waitAll(ctxT, ws, client.Version{Global: cur.Global, Local: cur.Local + 1}); err != nil {
			cancelT()
			return result{}, fmt.Errorf("trial %d: %w", t+1, err)
		}
		times = append(times, float64(time.Since(committed).Microseconds())/1000)
		cancelT()
	}
	sorted := append([]float64(nil), times...)
	sort.Float64s(sorted)
	return result{Watchers: w, Trials: trials, MedianMs: median(sorted), MaxMs: sorted[len(sorted)-1], TrialsMs: times}, nil
}

// waitAll waits until every watcher holds at least version target.
func waitAll(ctx context.Context, ws []*client.Watcher, target client.Version) error {
	for _, w := range ws {
		for {
			v := w.View()
			if v != nil && !v.Version.Less(target) {
				break
			}
			var have client.Version
			if v != nil {
				have = v.Version
			}
			if _, err := w.WaitNewer(ctx, have); err != nil {
				return err
			}
		}
	}
	return nil
}
