// Command etcdcoord is the benchmark peer of coordd: a coordinator that
// serves the subset of coordd's gRPC API (api/coordpb) the benchmark
// workloads call, implemented the way Milvus's coordinators do it. Every
// decision is one etcd transaction (a compare on this coordinator's session
// key revision, or on the decided key's revision or value, then the puts),
// batches are cut into transactions of at most 64 operations, TSO and ID
// allocation serve a window persisted to etcd from memory, streaming node
// sessions are etcd keys under leases (sessions.go) and PChannel
// assignment is streamingcoord's balancer over them (assign.go), and one
// etcd client (one multiplexed connection) is shared by every request.
//
// It lives in its own Go module so that coordd never depends on etcd. It is
// a benchmark tool, not a product: it keeps no state across restarts beyond
// what it writes to etcd and does not recover from it. See bench/RESULTS.md
// for how it is measured against coordd.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/balancer/policy"
	"github.com/coordd/coordd/objectstore"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:28500", "gRPC listen address (loopback)")
	endpoints := flag.String("endpoints", "127.0.0.1:23791", "etcd client endpoints, comma separated")
	walDir := flag.String("wal-dir", "", "directory of the stand-in WAL files the broadcaster appends to (required)")
	objDir := flag.String("object-store", "", "directory manifest revisions are written to (required)")
	pchannels := flag.Int("pchannels", 16, "PChannels (the data path: all held by node 1 at term 1)")
	minRebalance := flag.Duration("min-rebalance-interval", 5*time.Minute, "a channel assigned more recently is not moved by rebalancing")
	batchAcks := flag.Bool("broadcast-ack-batching", true, "save broadcast acks that arrive during a save together in the next etcd transaction (the newest Milvus); false: one transaction per ack")
	pprofAddr := flag.String("pprof-addr", "", "serve Go profiles under /debug/pprof/ on this loopback address (\"\": off)")
	flag.Parse()
	if *pprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		go func() { log.Printf("etcdcoord: pprof: %v", http.ListenAndServe(*pprofAddr, mux)) }()
	}
	pc := policy.DefaultConfig()
	pc.MinRebalanceInterval = *minRebalance
	if err := run(*listen, strings.Split(*endpoints, ","), *walDir, *objDir, *pchannels, pc, *batchAcks); err != nil {
		fmt.Fprintln(os.Stderr, "etcdcoord:", err)
		os.Exit(1)
	}
}

func run(listen string, endpoints []string, walDir, objDir string, npch int, pc policy.Config, batchAcks bool) error {
	if walDir == "" || objDir == "" || npch < 1 {
		return fmt.Errorf("-wal-dir, -object-store and a positive -pchannels are required")
	}
	pol, err := policy.New("", pc)
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	kv, err := newStore(ctx, cli)
	cancel()
	if err != nil {
		return err
	}
	ts, err := newTSO(kv, "tso/timestamp")
	if err != nil {
		return err
	}
	ids, err := newTSO(kv, "tso/id")
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	defer close(stop)
	go ts.run(stop)
	go ids.run(stop)
	wal, err := newWAL(walDir)
	if err != nil {
		return err
	}
	defer wal.close()
	cat, err := newCatalog(kv, ts, ids, npch)
	if err != nil {
		return err
	}
	actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
	asg, err := newAssigner(actx, kv, cat, pol)
	acancel()
	if err != nil {
		return err
	}
	defer asg.conns.close()
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	if err := watchSessions(wctx, cli, asg); err != nil {
		return err
	}
	go asg.run(stop)
	objs, err := objectstore.Open(context.Background(), objDir)
	if err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	defer objs.Close()
	srv := grpc.NewServer()
	coordpb.RegisterClusterServer(srv, &clusterServer{kv: kv})
	coordpb.RegisterAllocatorServer(srv, &allocServer{ts: ts, ids: ids})
	coordpb.RegisterDiagnosticsServer(srv, diagnosticsServer{})
	coordpb.RegisterChannelsServer(srv, &channelServer{cat: cat, asg: asg})
	coordpb.RegisterStreamingNodeRegistryServer(srv, newRegistry(kv, asg))
	coordpb.RegisterDataCoordServer(srv, &dataServer{cat: cat})
	coordpb.RegisterManifestServiceServer(srv, &manifestServer{cat: cat, store: objs})
	coordpb.RegisterBroadcasterServer(srv, newBroadcaster(kv, ids, wal, cat, batchAcks))
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; srv.Stop() }()
	log.Printf("etcdcoord: serving on %s, etcd %v", listen, endpoints)
	return srv.Serve(lis)
}
