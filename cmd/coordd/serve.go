package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/api/httpgateway"
	"github.com/coordd/coordd/api/metrics"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/controller/balancer"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/nodehealth"
	"github.com/coordd/coordd/raftnode"
)

func selfOf(c serveConfig) raftnode.Self {
	return raftnode.Self{ID: c.ID, RaftAddr: c.RaftAddr, GRPCAddr: c.GRPCAddr, HTTPAddr: c.HTTPAddr}
}

// serve runs one member until ctx ends, then shuts down in reverse order:
// stop accepting client calls, stop leader work and raft, close stores.
func serve(ctx context.Context, c serveConfig, logOut io.Writer) error {
	logger := hclog.New(&hclog.LoggerOptions{
		Name: "coordd", Level: hclog.LevelFromString(c.LogLevel), Output: logOut,
	}).With("id", c.ID)

	if err := c.Limits.checkFDs(); err != nil {
		return err
	}
	rc := c.Raft
	rc.ID, rc.DataDir, rc.RaftAddr, rc.Logger = c.ID, c.DataDir, c.RaftAddr, logger
	rc.TestOnlySkipIdentityCheck = c.TestOnlySkipIdentityCheck
	if len(c.RaftDial) > 0 {
		rc.AddressProvider = raftnode.StaticDialer(c.RaftDial)
	}
	// Check and lock the data dir before binding any port: a data dir in
	// use, damaged, or one that lost its raft state is refused at once.
	storage, err := raftnode.OpenStorage(rc)
	if err != nil {
		return err
	}
	rc.Storage = storage
	// Listen before starting raft so a port clash fails fast.
	grpcLis, err := net.Listen("tcp", c.GRPCAddr)
	if err != nil {
		storage.Close()
		return fmt.Errorf("listen on --grpc-addr: %w", err)
	}
	httpLis, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		grpcLis.Close()
		storage.Close()
		return fmt.Errorf("listen on --http-addr: %w", err)
	}
	node, err := raftnode.Open(rc)
	if err != nil {
		grpcLis.Close()
		httpLis.Close()
		return err
	}
	defer node.Shutdown()

	reg, err := metrics.New(node)
	if err != nil {
		return err
	}
	node.SetProposeObserver(func(d time.Duration) { reg.ApplyLatency.Observe(d.Seconds()) })
	node.SetApplyObserver(func(uint64, int) { reg.Applied.Inc() })

	tracker := nodehealth.New(node, nodehealth.Config{TTL: c.Channels.NodeTTL, Logger: logger.Named("nodehealth")})
	bcfg := c.Channels.balancerConfig()
	bcfg.Logger = logger.Named("balancer")
	bal, err := balancer.New(node, tracker, bcfg)
	if err != nil {
		return configError{fmt.Errorf("balancer: %w", err)}
	}
	defer bal.Close()
	node.AddLeaderRoutine("node-health", tracker.Run)
	node.AddLeaderRoutine("balancer", bal.Run)
	bm, err := broadcaster.NewMetrics(reg.Registerer())
	if err != nil {
		return err
	}
	bcast, err := broadcaster.New(node, broadcaster.NewGRPCAppender(), broadcaster.Config{
		Logger: logger.Named("broadcaster"), Metrics: bm,
		TombstoneMaxCount: c.Broadcast.TombstoneMaxCount, TombstoneMaxLifetime: c.Broadcast.TombstoneMaxLifetime,
		TombstoneCheckInterval:    c.Broadcast.TombstoneCheckInterval,
		UnsafeReleaseKeysAtCreate: c.TestOnlyUnsafeBroadcastOrder,
	})
	if err != nil {
		return configError{fmt.Errorf("broadcaster: %w", err)}
	}
	defer bcast.Close()
	node.AddLeaderRoutine("broadcaster", bcast.Run)
	srvOpts := []grpcserver.Option{grpcserver.WithNodeHealth(tracker), grpcserver.WithRebalancer(bal), grpcserver.WithBroadcaster(bcast),
		grpcserver.WithDataConfig(c.Segments.config()),
		grpcserver.WithMaxWatchers(c.Limits.MaxWatchers), grpcserver.WithMaxWait(c.Limits.MaxRequestWait),
		grpcserver.WithPanicObserver(func(surface, method string) { reg.HandlerPanics.WithLabelValues(surface, method).Inc() })}
	if c.TestOnlyUnsafeBroadcastOrder {
		logger.Warn("TEST ONLY: the broadcast order is deliberately broken (--test-only-unsafe-broadcast-order)")
	}
	if c.TestOnlyUnsafeIDReuse {
		logger.Warn("TEST ONLY: the ID allocator is deliberately broken (--test-only-unsafe-id-reuse)")
		srvOpts = append(srvOpts, grpcserver.WithUnsafeIDReuse())
	}
	srv := grpcserver.New(node, selfOf(c), logger.Named("api"), srvOpts...)
	defer srv.Close()
	if err := reg.RegisterChannels(node, srv.Watchers); err != nil {
		return err
	}
	observeFlush, err := reg.RegisterData(node.State, srv.Data().Allocations)
	if err != nil {
		return err
	}
	srv.Data().SetFlushObserver(observeFlush)
	// The logging interceptors run outside the recovery ones, so a
	// recovered panic (answered Internal) is logged with its request ID too.
	g := grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(8 << 20),
		grpc.MaxConcurrentStreams(uint32(c.Limits.GRPCMaxStreams)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: c.Limits.GRPCKeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.ChainUnaryInterceptor(srv.UnaryInterceptor()), grpc.ChainStreamInterceptor(srv.StreamInterceptor())},
		srv.RecoveryInterceptors()...)...)
	srv.Register(g)
	httpLimited := httpgateway.LimitListener(httpLis, c.Limits.HTTPMaxConns)
	if err := reg.RegisterLimits(func() []metrics.Limit { return limitsOf(c.Limits, srv, httpLimited) }); err != nil {
		return err
	}
	gw := httpgateway.New(srv, httpgateway.Probes{Node: node}, reg.Handler())
	var handler http.Handler = gw
	if c.EnablePprof {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.Handle("/", gw)
		handler = mux
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: c.Limits.HTTPReadTimeout,
		WriteTimeout: c.Limits.HTTPWriteTimeout, IdleTimeout: c.Limits.HTTPIdleTimeout, ErrorLog: httpErrorLog(logger)}

	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- g.Serve(grpcLis) }()
	go func() { defer wg.Done(); errc <- hs.Serve(httpLimited) }()

	opts := cluster.Options{Self: selfOf(c), Peers: c.Peers, Join: c.Join, Logger: logger,
		TestOnlySkipIdentityCheck: c.TestOnlySkipIdentityCheck}
	bgctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := cluster.Enter(bgctx, node, opts); err != nil {
		g.Stop()
		hs.Close()
		wg.Wait()
		return err
	}
	wg.Add(1)
	go func() { defer wg.Done(); cluster.KeepRegistered(bgctx, node, opts) }()
	logger.Info("serving", "raft", c.RaftAddr, "grpc", c.GRPCAddr, "http", c.HTTPAddr)

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("server stopped: %w", err)
		}
	}
	cancel()
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	_ = hs.Shutdown(shutdownCtx)
	stopGRPC(g, 3*time.Second)
	if err := node.Shutdown(); err != nil && runErr == nil {
		runErr = err
	}
	wg.Wait()
	return runErr
}

// limitsOf reports each bound with its use and refusals, for metrics.
func limitsOf(l limitFlags, srv *grpcserver.Server, httpLis *httpgateway.LimitedListener) []metrics.Limit {
	sl := srv.Limits()
	return []metrics.Limit{
		{Name: "http_connections", Max: float64(l.HTTPMaxConns), InUse: float64(httpLis.Open()), Refused: httpLis.Refused()},
		{Name: "assignment_watchers", Max: float64(sl.MaxWatchers), InUse: float64(srv.Watchers()), Refused: sl.WatchersRefused},
		{Name: "grpc_streams_per_connection", Max: float64(l.GRPCMaxStreams), InUse: -1},
		{Name: "grpc_keepalive_min_time_seconds", Max: l.GRPCKeepaliveMinTime.Seconds(), InUse: -1},
		{Name: "request_wait_seconds", Max: sl.MaxWait.Seconds(), InUse: -1},
		{Name: "http_read_timeout_seconds", Max: l.HTTPReadTimeout.Seconds(), InUse: -1},
		{Name: "http_write_timeout_seconds", Max: l.HTTPWriteTimeout.Seconds(), InUse: -1},
		{Name: "http_idle_timeout_seconds", Max: l.HTTPIdleTimeout.Seconds(), InUse: -1},
	}
}

// httpErrorLog sends the HTTP server's own errors (accept errors, TLS and
// protocol noise) to the member's log at WARN.
func httpErrorLog(logger hclog.Logger) *log.Logger {
	return logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn})
}

// stopGRPC drains in-flight calls, then forces the rest closed.
func stopGRPC(g *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		g.Stop()
	}
}
