// Command coordbench measures a local coordd cluster. It launches the
// cluster itself (bin/coordd, three processes on 127.0.0.1, plus
// bin/streamingnode processes where the workload needs them), runs one
// workload, prints one JSON line with the result, and stops everything.
// With -compare it also launches a 3-member etcd and bench/etcdcoord (an
// etcd-backed coordinator built the way Milvus's are) and prints one line
// per cell with both sides and the ratio (see compare.go).
//
//	coordbench -workload w1,w3 -clients 1,16,64 -duration 10s -compare
//	coordbench -workload w3-saturated -clients 64 -duration 5m -hog 2 [-coordd-flags "..."]
//	coordbench -workload commit|alloc-ts|alloc-id|failover|sn-failover|balance|watchers|broadcast|assign|timeticks [flags]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// trial-based workloads
	Trials   int       `json:"trials,omitempty"`
	MedianMs float64   `json:"median_ms,omitempty"`
	MaxMs    float64   `json:"max_ms,omitempty"`
	TrialsMs []float64 `json:"trials_ms,omitempty"`
	// channel workloads
	TTLms       int64 `json:"ttl_ms,omitempty"`
	PChannels   int   `json:"pchannels,omitempty"`
	Nodes       int   `json:"nodes,omitempty"`
	MaxPerNode  int   `json:"max_per_node,omitempty"`
	MinPerNode  int   `json:"min_per_node,omitempty"`
	Watchers    int   `json:"watchers,omitempty"`
	AllAssigned bool  `json:"all_assigned,omitempty"`
	// broadcast
	Cells []broadcastCell `json:"cells,omitempty"`
	// write path: raft log entries applied during the run, and during an
	// idle period of the same length before it
	LogEntries     int64 `json:"log_entries,omitempty"`
	IdleLogEntries int64 `json:"idle_log_entries,omitempty"`
	// flush latency
	FlushCells []flushCell `json:"flush_cells,omitempty"`
}

type options struct {
	workload, binary, snBinary string
	basePort, clients, conns   int
	duration                   time.Duration
	maxOps, trials             int
	nodeTTL                    time.Duration
	pchannels, snodes          int
	watchers                   int
	// -compare (bench/etcdcoord as the peer)
	compare, withPeer      bool
	clientsList            string
	etcdBinary, peerBinary string
	etcdPort, peerPort     int
	// coorddFlags are extra flags for every coordd member (a tuning knob
	// under test, e.g. "--raft-inflight-entries 2").
	coorddFlags string
	// peerFlags are extra flags for the peer (e.g.
	// "-broadcast-ack-batching=false")
	peerFlags string
	// profileDir: with -compare, a CPU profile of coordd's leader and of
	// the peer process per measured cell is written here ("": none)
	profileDir string
	// hogs: CPU hog processes for w3-saturated
	hogs int
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == hogArg {
		hogLoop()
	}
	var o options
	flag.StringVar(&o.workload, "workload", "commit", "commit, alloc-ts, alloc-id, status, failover, sn-failover, balance, watchers, broadcast, assign, timeticks or flush; with -compare w1..w6, w3-failover; w3-saturated (coordd only, -hog)")
	flag.StringVar(&o.clientsList, "clients", "64", "concurrent clients (load workloads); with -compare a list such as 1,16,64")
	flag.IntVar(&o.conns, "conns", 8, "gRPC connections shared by the clients")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured run time per load workload")
	flag.IntVar(&o.maxOps, "max-ops", 2_000_000, "stop a load workload after this many operations")
	flag.IntVar(&o.trials, "trials", 10, "trials (failover, sn-failover, watchers)")
	flag.StringVar(&o.binary, "coordd", "bin/coordd", "coordd binary")
	flag.StringVar(&o.snBinary, "streamingnode", "bin/streamingnode", "streamingnode binary")
	flag.IntVar(&o.basePort, "base-port", 37001, "cluster base port (launcher layout: +100 raft, +1000 HTTP, +200 streaming nodes); 27001 is coordd dev's")
	flag.DurationVar(&o.nodeTTL, "node-ttl", 3*time.Second, "streaming node session TTL (sn-failover)")
	flag.IntVar(&o.pchannels, "pchannels", 256, "pchannels (balance)")
	flag.IntVar(&o.snodes, "streaming-nodes", 8, "streaming nodes (balance)")
	flag.IntVar(&o.watchers, "watchers", 1000, "assignment watchers (watchers)")
	flag.BoolVar(&o.compare, "compare", false, "run -workload (w1..w6, or a comma-separated list) on coordd and on the etcd-backed peer (bench/etcdcoord), one JSON line per cell")
	flag.BoolVar(&o.withPeer, "peer", true, "with -compare: also run every cell on the peer (false: coordd only, e.g. a long steady-state run)")
	flag.StringVar(&o.etcdBinary, "etcd", "", "etcd binary for -compare (default: bench/etcd/build.sh's cache)")
	flag.StringVar(&o.peerBinary, "etcdcoord", "bin/etcdcoord", "the peer's binary for -compare")
	flag.IntVar(&o.etcdPort, "etcd-port", 23791, "first etcd client port for -compare (peer ports +10)")
	flag.IntVar(&o.peerPort, "peer-port", 28500, "the peer's gRPC port for -compare")
	flag.StringVar(&o.coorddFlags, "coordd-flags", "", "extra flags for every coordd member, space-separated (e.g. \"--raft-inflight-entries 2\")")
	flag.StringVar(&o.peerFlags, "peer-flags", "", "with -compare: extra flags for etcdcoord, space-separated (e.g. \"-broadcast-ack-batching=false\")")
	flag.IntVar(&o.hogs, "hog", 2, "w3-saturated: CPU hog processes (busy loops at coordbench's priority) kept running for the whole run")
	flag.StringVar(&o.profileDir, "profile-dir", "", "with -compare: write a CPU profile of coordd's leader (and its followers, suffixed -follower1, -follower2) and of the peer process for every measured cell here (a diagnostic: it costs CPU)")
	flag.Parse()
	var err error
	if o.compare || coorddOnly(o.workload) {
		err = runCompare(o)
	} else if o.clients, err = strconv.Atoi(o.clientsList); err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordbench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.clients < 1 || o.conns < 1 || o.duration <= 0 || o.trials < 1 || o.pchannels < 1 || o.snodes < 1 || o.watchers < 1 {
		return fmt.Errorf("counts and durations must be positive")
	}
	dir, err := os.MkdirTemp("", "coordbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := filepath.Abs(o.binary)
	if err != nil {
		return err
	}
	sn, err := filepath.Abs(o.snBinary)
	if err != nil {
		return err
	}
	cfg := cluster.LauncherConfig{Binary: bin, DataDir: dir, Nodes: 3, BasePort: o.basePort, Host: "127.0.0.1",
		ExtraArgs: []string{"--log-level", "warn", "--enable-pprof"}, StreamingBinary: sn}
	cfg.ExtraArgs = append(cfg.ExtraArgs, strings.Fields(o.coorddFlags)...)
	switch o.workload {
	case "sn-failover":
		cfg.StreamingNodes = 2
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--node-ttl", o.nodeTTL.String(), "--pchannels", "16",
			"--min-rebalance-interval", "0s", "--balance-interval", "1s")
	case "balance":
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--pchannels", fmt.Sprint(o.pchannels))
	case "broadcast":
		cfg.StreamingNodes = 2
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--pchannels", "256")
	case "flush":
		cfg.StreamingNodes = 2
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--pchannels", "64", "--segment-check-interval", "200ms")
	case "assign", "timeticks":
		cfg.StreamingNodes = 1
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--pchannels", "4")
	}
	if err := portsFree(launcherPorts(o.basePort, cfg.Nodes, cfg.StreamingNodes)); err != nil {
		return err
	}
	l := cluster.NewLauncher(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.Start(ctx); err != nil {
		return err
	}
	defer l.Stop()

	var res result
	switch o.workload {
	case "commit", "alloc-ts", "alloc-id", "status":
		res, err = load(l, o.workload, o.clients, o.conns, o.duration, o.maxOps)
	case "assign", "timeticks":
		res, err = dataLoad(l, o.workload, o.clients, o.conns, o.duration)
	case "flush":
		var cells []flushCell
		res, cells, err = flushLatency(l, o.trials)
		res.FlushCells = cells
	case "manifest":
		res, err = manifestCommits(l, o.clients, o.duration)
	case "failover":
		res, err = failover(l, o.trials)
	case "sn-failover":
		res, err = snFailover(l, o.trials, o.nodeTTL)
	case "balance":
		res, err = balanceFromScratch(l, cfg, o.snodes, o.pchannels)
	case "watchers":
		res, err = watchers(l, o.watchers, o.trials)
	case "broadcast":
		var cells []broadcastCell
		res, cells, err = broadcasts(l, o.clients)
		res.Cells = cells
	default:
		return fmt.Errorf("unknown workload %q", o.workload)
	}
	if err != nil {
		return err
	}
	res.System, res.Workload = "coordd", o.workload
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

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
