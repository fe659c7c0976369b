// Command coordbench measures a local coordd cluster: committed-command
// throughput, allocator throughput and leader failover time. It launches the
// cluster itself (bin/coordd, three processes on 127.0.0.1), runs one
// workload, prints a JSON line per result, and stops the cluster.
//
//	coordbench -workload commit|alloc-ts|alloc-id|failover [-clients 64] [-duration 10s] [-trials 10]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
)

type result struct {
	System    string  `json:"system"`
	Workload  string  `json:"workload"`
	Clients   int     `json:"clients,omitempty"`
	Ops       int     `json:"ops,omitempty"`
	Errors    int     `json:"errors,omitempty"`
	OpsPerSec float64 `json:"ops_per_sec,omitempty"`
	P50ms     float64 `json:"p50_ms,omitempty"`
	P99ms     float64 `json:"p99_ms,omitempty"`
	// failover
	Trials   int       `json:"trials,omitempty"`
	MedianMs float64   `json:"median_ms,omitempty"`
	MaxMs    float64   `json:"max_ms,omitempty"`
	TrialsMs []float64 `json:"trials_ms,omitempty"`
}

func main() {
	workload := flag.String("workload", "commit", "commit, alloc-ts, alloc-id or failover")
	clients := flag.Int("clients", 64, "concurrent clients")
	conns := flag.Int("conns", 8, "gRPC connections shared by the clients")
	duration := flag.Duration("duration", 10*time.Second, "measured run time per workload")
	maxOps := flag.Int("max-ops", 2_000_000, "stop after this many operations")
	trials := flag.Int("trials", 10, "failover trials")
	binary := flag.String("coordd", "bin/coordd", "coordd binary")
	basePort := flag.Int("base-port", 27001, "cluster base port (see coordd dev)")
	flag.Parse()
	if err := run(*workload, *binary, *basePort, *clients, *conns, *duration, *maxOps, *trials); err != nil {
		fmt.Fprintln(os.Stderr, "coordbench:", err)
		os.Exit(1)
	}
}

func run(workload, binary string, basePort, clients, conns int, duration time.Duration, maxOps, trials int) error {
	if clients < 1 || conns < 1 || duration <= 0 || trials < 1 {
		return fmt.Errorf("clients, conns, duration and trials must be positive")
	}
	dir, err := os.MkdirTemp("", "coordbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	abs, err := filepath.Abs(binary)
	if err != nil {
		return err
	}
	l := cluster.NewLauncher(cluster.LauncherConfig{Binary: abs, DataDir: dir, Nodes: 3, BasePort: basePort, Host: "127.0.0.1",
		ExtraArgs: []string{"--log-level", "warn", "--enable-pprof"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.Start(ctx); err != nil {
		return err
	}
	defer l.Stop()

	var res result
	switch workload {
	case "commit", "alloc-ts", "alloc-id":
		res, err = load(l, workload, clients, conns, duration, maxOps)
	case "failover":
		res, err = failover(l, trials)
	default:
		return fmt.Errorf("unknown workload %q", workload)
	}
	if err != nil {
		return err
	}
	res.System, res.Workload = "coordd", workload
	return json.NewEncoder(os.Stdout).Encode(res)
}

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// leader finds the established leader's member index.
func leader(l *cluster.Launcher, skip int) (int, error) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range l.Members() {
			if i == skip {
				continue
			}
			conn, err := dial(m.GRPCAddr)
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			st, err := coordpb.NewClusterClient(conn).Status(ctx, &coordpb.StatusRequest{})
			cancel()
			conn.Close()
			if err == nil && st.State == "Leader" && st.EstablishedTerm == st.Term {
				return i, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1, fmt.Errorf("no established leader")
}

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

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
