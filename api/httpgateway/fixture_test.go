package httpgateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/api/metrics"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/logging"
	"github.com/coordd/coordd/raftnode"
)

// Every wait in these tests is bounded by one of these.
const (
	readyTimeout = 15 * time.Second // leader elected, established, registered
	callTimeout  = 10 * time.Second // one request
)

// gatewayNode is a real single-member coordd cluster in this process, with
// the gRPC services on 127.0.0.1:0 and the HTTP gateway (and its metrics)
// served by httptest on 127.0.0.1. metrics.New installs go-metrics' one
// process-wide sink, so the test binary has exactly one of these; TestMain
// starts it and tears it down.
type gatewayNode struct {
	node    *raftnode.Node
	srv     *grpcserver.Server
	grpc    *grpc.Server
	http    *httptest.Server
	client  *http.Client
	self    raftnode.Self
	metrics *metrics.Registry
	conn    *grpc.ClientConn
	dataDir string
	// logs is the API server's logging; its lines go to logOut.
	logs   *logging.Logs
	logOut *lockedBuffer
}

// lockedBuffer is a log output the tests read while the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var shared *gatewayNode

func TestMain(m *testing.M) {
	var err error
	shared, err = startGatewayNode()
	if err != nil {
		fmt.Fprintf(os.Stderr, "httpgateway tests: start node: %v\n", err)
		if shared != nil {
			shared.stop()
		}
		os.Exit(1)
	}
	code := m.Run()
	shared.stop()
	os.Exit(code)
}

func startGatewayNode() (*gatewayNode, error) {
	g := &gatewayNode{}
	var err error
	if g.dataDir, err = os.MkdirTemp("", "coordd-httpgateway-test-"); err != nil {
		return nil, err
	}
	logger := hclog.NewNullLogger()
	if os.Getenv("COORDD_TEST_LOG") != "" {
		logger = hclog.New(&hclog.LoggerOptions{Name: "httpgateway-test", Level: hclog.Debug, Output: os.Stderr})
	}
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return g, err
	}
	g.http = httptest.NewUnstartedServer(nil) // listens on 127.0.0.1:0
	g.self = raftnode.Self{ID: "gw1", RaftAddr: "127.0.0.1:1", GRPCAddr: grpcLis.Addr().String(), HTTPAddr: g.http.Listener.Addr().String()}

	_, trans := raft.NewInmemTransport(raft.ServerAddress(g.self.RaftAddr))
	g.node, err = raftnode.Open(raftnode.Config{ID: g.self.ID, DataDir: g.dataDir, RaftAddr: g.self.RaftAddr, Transport: trans, Logger: logger})
	if err != nil {
		grpcLis.Close()
		return g, err
	}
	if g.metrics, err = metrics.New(g.node); err != nil {
		grpcLis.Close()
		return g, err
	}
	g.node.SetProposeObserver(func(d time.Duration) { g.metrics.ApplyLatency.Observe(d.Seconds()) })
	g.node.SetApplyObserver(func(uint64, int) { g.metrics.Applied.Inc() })

	set, err := routines.New(g.node, routines.Config{})
	if err != nil {
		grpcLis.Close()
		return g, err
	}
	g.node.AddLeaderRoutine(routines.Name, set.Run)
	g.logOut = &lockedBuffer{}
	var logOut io.Writer = g.logOut
	if os.Getenv("COORDD_TEST_LOG") != "" {
		logOut = io.MultiWriter(g.logOut, os.Stderr)
	}
	if g.logs, err = logging.New(logging.Options{Name: "httpgateway-test", Level: "info", Output: logOut}); err != nil {
		grpcLis.Close()
		return g, err
	}
	g.srv = grpcserver.New(g.node, g.self, g.logs.Logger().Named("api"), set, grpcserver.WithLogs(g.logs))
	g.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(g.srv.UnaryInterceptor()))
	g.srv.Register(g.grpc)
	go func() { _ = g.grpc.Serve(grpcLis) }()
	g.http.Config.Handler = New(g.srv, Probes{Node: g.node}, g.metrics.Handler())
	g.http.Start()
	g.client = g.http.Client()
	g.client.Timeout = callTimeout

	if err := g.node.Bootstrap([]raftnode.Peer{{ID: g.self.ID, RaftAddr: g.self.RaftAddr}}); err != nil {
		return g, err
	}
	deadline := time.Now().Add(readyTimeout)
	for g.node.EstablishedTerm() == 0 {
		if time.Now().After(deadline) {
			return g, fmt.Errorf("no established leader after %v", readyTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if g.conn, err = grpc.NewClient(g.self.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return g, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err = coordpb.NewClusterClient(g.conn).RegisterMember(ctx, &coordpb.RegisterMemberRequest{
		Id: g.self.ID, RaftAddr: g.self.RaftAddr, GrpcAddr: g.self.GRPCAddr, HttpAddr: g.self.HTTPAddr})
	if err != nil {
		return g, fmt.Errorf("register member: %w", err)
	}
	if m, ok := g.node.State().Member(g.self.ID); !ok || m.HttpAddr != g.self.HTTPAddr {
		return g, errors.New("member not registered after RegisterMember")
	}
	return g, nil
}

func (g *gatewayNode) stop() {
	if g.conn != nil {
		g.conn.Close()
	}
	if g.http != nil {
		g.http.Close()
	}
	if g.grpc != nil {
		g.grpc.Stop()
	}
	if g.srv != nil {
		g.srv.Close()
	}
	if g.node != nil {
		_ = g.node.Shutdown()
	}
	os.RemoveAll(g.dataDir)
}

// do sends one request to the gateway and returns the status, content type
// and body.
func do(t *testing.T, method, path, body string) (int, string, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, shared.http.URL+path, r)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := shared.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), data
}
