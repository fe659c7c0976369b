package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/api/httpgateway"
	"github.com/coordd/coordd/api/metrics"
	"github.com/coordd/coordd/api/tokens"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/nodehealth"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/logging"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/security"
)

func selfOf(c serveConfig) raftnode.Self {
	return raftnode.Self{ID: c.ID, RaftAddr: c.RaftAddr, GRPCAddr: c.GRPCAddr, HTTPAddr: c.HTTPAddr}
}

// serve runs one member until ctx ends, then shuts down in reverse order:
// stop accepting client calls, stop leader work and raft, close stores.
// Each step is one function below, in the order they run.
func serve(ctx context.Context, c serveConfig, logOut io.Writer) error {
	logs, err := logging.New(logging.Options{Name: "coordd", Level: c.LogLevel, Format: c.LogFormat, Output: logOut})
	if err != nil {
		return configError{err}
	}
	logger := logs.Logger().With("id", c.ID)
	if err := c.Limits.checkFDs(); err != nil {
		return err
	}
	applyMemoryLimit(c.MemoryLimit, c.Raft.StateBudget, logger)
	sec, err := c.Security.load()
	if err != nil {
		return err
	}
	if sec == nil {
		logger.Warn("INSECURE: plaintext on every port and no authentication (--insecure); anyone who can reach a port controls the cluster")
	}
	node, lis, err := openNode(c, sec, logger)
	if err != nil {
		return err
	}
	defer node.Shutdown()
	reg, err := newMetrics(node)
	if err != nil {
		return err
	}
	var extra []routines.Routine
	if sec != nil && sec.bootstrap != nil {
		extra = append(extra, routines.Routine{Name: "bootstrap-token", Run: tokens.BootstrapRoutine(node, *sec.bootstrap, logger.Named("auth"))})
	}
	set, err := newControllers(c, sec, node, reg, logger, extra)
	if err != nil {
		return err
	}
	defer set.Close()
	node.AddLeaderRoutine(routines.Name, set.Run) // every leader routine, in order
	srv, err := newAPI(c, sec, node, set, reg, logs, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	g, hs, err := newServers(c, sec, node, srv, reg, lis, logger)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- g.Serve(lis.grpc) }()
	go func() {
		defer wg.Done()
		if hs.TLSConfig != nil {
			errc <- hs.ServeTLS(lis.http, "", "") // certificates are in TLSConfig
			return
		}
		errc <- hs.Serve(lis.http)
	}()

	opts := cluster.Options{Self: selfOf(c), Peers: c.Peers, Join: c.Join, Logger: logger,
		TestOnlySkipIdentityCheck: c.TestOnlySkipIdentityCheck}
	if sec != nil {
		opts.RaftTLS = &raftnode.RaftTLS{Server: sec.tls.RaftServer(), Client: sec.tls.RaftClient()}
		opts.APITLS = sec.tls.APIClient("")
	}
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
	logger.Info("serving", "raft", c.RaftAddr, "grpc", c.GRPCAddr, "http", c.HTTPAddr, "log_store", node.LogStore())

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

// listeners are the member's client-facing ports.
type listeners struct {
	grpc net.Listener
	http *httpgateway.LimitedListener
}

// openNode checks and locks the data dir, binds the ports and opens the
// raft node, in that order: a data dir in use, damaged, or one that lost
// its raft state is refused before any port is bound, and a port clash
// fails before raft starts.
func openNode(c serveConfig, sec *secureSetup, logger hclog.Logger) (*raftnode.Node, listeners, error) {
	rc := c.Raft
	rc.ID, rc.DataDir, rc.RaftAddr, rc.Logger = c.ID, c.DataDir, c.RaftAddr, logger
	if sec != nil {
		rc.TLS = &raftnode.RaftTLS{Server: sec.tls.RaftServer(), Client: sec.tls.RaftClient()}
	}
	rc.TestOnlySkipIdentityCheck = c.TestOnlySkipIdentityCheck
	rc.FaultInjection = c.FaultInjection
	rc.MaxPendingProposals = c.Limits.MaxPendingProposals
	if c.LeaseReads {
		rc.LeaderLease = leaseFor(rc.HeartbeatTimeout)
	}
	if len(c.RaftDial) > 0 {
		rc.AddressProvider = raftnode.StaticDialer(c.RaftDial)
	}
	storage, err := raftnode.OpenStorage(rc)
	if err != nil {
		return nil, listeners{}, err
	}
	rc.Storage = storage
	grpcLis, err := net.Listen("tcp", c.GRPCAddr)
	if err != nil {
		storage.Close()
		return nil, listeners{}, fmt.Errorf("listen on --grpc-addr: %w", err)
	}
	httpLis, err := net.Listen("tcp", c.HTTPAddr)
	if err != nil {
		grpcLis.Close()
		storage.Close()
		return nil, listeners{}, fmt.Errorf("listen on --http-addr: %w", err)
	}
	node, err := raftnode.Open(rc)
	if err != nil {
		grpcLis.Close()
		httpLis.Close()
		return nil, listeners{}, err
	}
	return node, listeners{grpc: grpcLis, http: httpgateway.LimitListener(httpLis, c.Limits.httpConnLimits())}, nil
}

// newMetrics registers the node's metrics and observes its proposals.
func newMetrics(node *raftnode.Node) (*metrics.Registry, error) {
	reg, err := metrics.New(node)
	if err != nil {
		return nil, err
	}
	node.SetProposeObserver(func(d time.Duration) { reg.ApplyLatency.Observe(d.Seconds()) })
	node.SetApplyObserver(func(uint64, int) { reg.Applied.Inc() })
	return reg, nil
}

// newControllers builds every leader-only controller from the flags; extra
// (routines of the API layer) runs in the same set, after the controllers.
func newControllers(c serveConfig, sec *secureSetup, node *raftnode.Node, reg *metrics.Registry, logger hclog.Logger, extra []routines.Routine) (*routines.Set, error) {
	bcfg := c.Channels.balancerConfig()
	bcfg.Logger = logger.Named("balancer")
	// Calls to streaming nodes present this member's server certificate
	// (the node admits Assign, Remove and coordinator appends only from
	// it) and verify the node's (docs/security.md#the-streaming-nodes-port).
	var snTLS *tls.Config
	if sec != nil {
		snTLS = security.StreamingNodeClient(sec.tls.APIClient(""))
	}
	bcfg.StreamingTLS = snTLS
	bm, err := broadcaster.NewMetrics(reg.Registerer())
	if err != nil {
		return nil, err
	}
	if c.TestOnlyUnsafeBroadcastOrder {
		logger.Warn("TEST ONLY: the broadcast order is deliberately broken (--test-only-unsafe-broadcast-order)")
	}
	if c.TestOnlyUnsafeIDReuse {
		logger.Warn("TEST ONLY: the ID allocator is deliberately broken (--test-only-unsafe-id-reuse)")
	}
	hm, err := nodehealth.NewMetrics(reg.Registerer())
	if err != nil {
		return nil, err
	}
	mcfg, err := c.Manifests.config(reg, logger)
	if err != nil {
		return nil, err
	}
	set, err := routines.New(node, routines.Config{
		Manifest:   mcfg,
		NodeHealth: nodehealth.Config{TTL: c.Channels.NodeTTL, Logger: logger.Named("nodehealth"), Metrics: hm},
		Balancer:   &bcfg,
		Broadcaster: &broadcaster.Config{
			Logger: logger.Named("broadcaster"), Metrics: bm,
			TombstoneMaxCount: c.Broadcast.TombstoneMaxCount, TombstoneMaxLifetime: c.Broadcast.TombstoneMaxLifetime,
			TombstoneCheckInterval:    c.Broadcast.TombstoneCheckInterval,
			UnsafeReleaseKeysAtCreate: c.TestOnlyUnsafeBroadcastOrder,
		},
		StreamingTLS:  snTLS,
		Data:          c.Segments.config(),
		UnsafeIDReuse: c.TestOnlyUnsafeIDReuse,
		Logger:        logger.Named("channels"),
		Extra:         extra,
	})
	if err != nil {
		if mcfg.Store != nil {
			mcfg.Store.Close()
		}
		return nil, configError{err}
	}
	// Heartbeat ages (leader only) and the node TTL, for the silent-node
	// alert (docs/operations.md#monitoring).
	if err := set.Health.RegisterMetrics(reg.Registerer(), func() bool { return node.EstablishedTerm() != 0 }); err != nil {
		return nil, err
	}
	return set, nil
}

// newAPI builds the gRPC services over the node and the controllers, and
// registers the metrics that read them.
func newAPI(c serveConfig, sec *secureSetup, node *raftnode.Node, set *routines.Set, reg *metrics.Registry, logs *logging.Logs, logger hclog.Logger) (*grpcserver.Server, error) {
	opts := []grpcserver.Option{grpcserver.WithLogs(logs),
		grpcserver.WithMaxWatchers(c.Limits.MaxWatchers), grpcserver.WithMaxWait(c.Limits.MaxRequestWait),
		grpcserver.WithPanicObserver(func(surface, method string) { reg.HandlerPanics.WithLabelValues(surface, method).Inc() })}
	if sec != nil {
		opts = append(opts, grpcserver.WithAuth(), grpcserver.WithPeerTLS(sec.tls.APIClient("")))
	}
	srv := grpcserver.New(node, selfOf(c), logger.Named("api"), set, opts...)
	if err := reg.RegisterChannels(node, srv.Watchers); err != nil {
		srv.Close()
		return nil, err
	}
	if err := reg.RegisterTSOSkew(srv.TSOSkew); err != nil {
		srv.Close()
		return nil, err
	}
	observeFlush, err := reg.RegisterData(node.State, set.Data.Allocations)
	if err != nil {
		srv.Close()
		return nil, err
	}
	set.Data.SetFlushObserver(observeFlush)
	return srv, nil
}

// newServers builds the gRPC server and the HTTP gateway (with pprof when
// enabled) over srv.
func newServers(c serveConfig, sec *secureSetup, node *raftnode.Node, srv *grpcserver.Server, reg *metrics.Registry, lis listeners, logger hclog.Logger) (*grpc.Server, *http.Server, error) {
	// Authorisation runs first, before any handler; the logging
	// interceptors run outside the recovery ones, so a recovered panic
	// (answered Internal) is logged with its request ID too.
	opts := srv.AuthInterceptors()
	if sec != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(sec.tls.APIServer())))
	}
	opts = append(opts, grpcTransportOptions(c.Limits)...)
	g := grpc.NewServer(append(append(opts,
		grpc.ChainUnaryInterceptor(srv.UnaryInterceptor()), grpc.ChainStreamInterceptor(srv.StreamInterceptor())),
		srv.RecoveryInterceptors()...)...)
	srv.Register(g)
	if err := reg.RegisterLimits(func() []metrics.Limit { return limitsOf(c.Limits, srv, node, lis.http) }); err != nil {
		return nil, nil, err
	}
	var gwOpts []httpgateway.Option
	if c.EnablePprof {
		gwOpts = append(gwOpts, httpgateway.WithPprof())
	}
	if c.FaultInjection {
		logger.Warn("TEST ONLY: fault injection is on (/debug/raft-delay can hold this member's raft messages)")
		gwOpts = append(gwOpts, httpgateway.WithFaultInjection(node))
	}
	var handler http.Handler = httpgateway.New(srv, httpgateway.Probes{Node: node, MaxLag: c.ReadyMaxLag}, reg.Handler(), gwOpts...)
	// The TLS handshake shares the header timeout (net/http bounds it by
	// the shortest read timeout); waiting connections are also evicted by
	// newer ones at the caps (httpgateway.LimitedListener, through
	// ConnContext).
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: c.Limits.HTTPReadHeaderTimeout, ReadTimeout: c.Limits.HTTPReadTimeout,
		WriteTimeout: c.Limits.HTTPWriteTimeout, IdleTimeout: c.Limits.HTTPIdleTimeout, ErrorLog: httpErrorLog(logger),
		ConnContext: lis.http.ConnContext}
	if sec != nil {
		hs.TLSConfig = sec.tls.APIServer()
	}
	return g, hs, nil
}

// limitsOf reports each bound with its use and refusals, for metrics.
func limitsOf(l limitFlags, srv *grpcserver.Server, node *raftnode.Node, httpLis *httpgateway.LimitedListener) []metrics.Limit {
	sl := srv.Limits()
	pq := node.ProposalQueue()
	return []metrics.Limit{
		{Name: "pending_proposals", Max: float64(pq.Max), InUse: float64(pq.Pending), Refused: pq.Rejected},
		{Name: "raft_inflight_entries", Max: float64(pq.MaxInflight), InUse: float64(pq.Inflight)},
		{Name: "http_connections", Max: float64(l.HTTPMaxConns), InUse: float64(httpLis.Open()), Refused: httpLis.Refused()},
		{Name: "http_unauthenticated_connections", Max: float64(httpLis.MaxUnauthenticated()), InUse: float64(httpLis.Unauthenticated()),
			Refused: httpLis.Evicted()},
		{Name: "assignment_watchers", Max: float64(sl.MaxWatchers), InUse: float64(srv.Watchers()), Refused: sl.WatchersRefused},
		{Name: "grpc_streams_per_connection", Max: float64(l.GRPCMaxStreams), InUse: -1},
		{Name: "grpc_keepalive_min_time_seconds", Max: l.GRPCKeepaliveMinTime.Seconds(), InUse: -1},
		{Name: "request_wait_seconds", Max: sl.MaxWait.Seconds(), InUse: -1},
		{Name: "http_read_header_timeout_seconds", Max: l.HTTPReadHeaderTimeout.Seconds(), InUse: -1},
		{Name: "http_read_timeout_seconds", Max: l.HTTPReadTimeout.Seconds(), InUse: -1},
		{Name: "grpc_handshake_timeout_seconds", Max: l.GRPCHandshakeTimeout.Seconds(), InUse: -1},
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

// leaseFor is the leader lease --lease-reads gives: followers keep refusing
// other candidates for at least the heartbeat timeout after they last heard
// from the leader; a tenth of it is left for clock-rate drift between
// members and scheduling.
func leaseFor(heartbeat time.Duration) time.Duration { return heartbeat * 9 / 10 }
