package httpgateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/apitest"
	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/api/metrics"
	"github.com/coordd/coordd/logging"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/testutil"
)

// Every wait in these tests is bounded by one of these.
const (
	readyTimeout = apitest.ReadyTimeout // leader elected, established, registered
	callTimeout  = apitest.CallTimeout  // one request
)

// gatewayNode is a real single-member coordd cluster in this process (see
// package apitest), with the gRPC services on 127.0.0.1:0 and the HTTP
// gateway (and its metrics) served by httptest on 127.0.0.1. metrics.New
// installs go-metrics' one process-wide sink, so the test binary has
// exactly one of these; TestMain starts it and tears it down.
type gatewayNode struct {
	*apitest.Node
	node    *raftnode.Node
	srv     *grpcserver.Server
	http    *httptest.Server
	client  *http.Client
	self    raftnode.Self
	metrics *metrics.Registry
	// logs is the API server's logging; its lines go to logOut.
	logs   *logging.Logs
	logOut *testutil.Buffer
}

var shared *gatewayNode

func TestMain(m *testing.M) {
	var err error
	shared, err = startGatewayNode()
	if err != nil {
		fmt.Fprintf(os.Stderr, "httpgateway tests: start node: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	shared.stop()
	os.Exit(code)
}

func startGatewayNode() (*gatewayNode, error) {
	g := &gatewayNode{}
	n, err := apitest.Start(apitest.Config{ID: "gw1", HTTP: true, Logger: apitest.TestLogger("httpgateway-test"),
		Serve: func(n *apitest.Node) (apitest.Services, error) {
			var err error
			if g.metrics, err = metrics.New(n.Raft); err != nil {
				return apitest.Services{}, err
			}
			n.Raft.SetProposeObserver(func(d time.Duration) { g.metrics.ApplyLatency.Observe(d.Seconds()) })
			n.Raft.SetApplyObserver(func(uint64, int) { g.metrics.Applied.Inc() })
			// The API server's log lines go to logOut, which tests read.
			g.logOut = &testutil.Buffer{}
			var logOut io.Writer = g.logOut
			if os.Getenv("COORDD_TEST_LOG") != "" {
				logOut = io.MultiWriter(g.logOut, os.Stderr)
			}
			if g.logs, err = logging.New(logging.Options{Name: "httpgateway-test", Level: "info", Output: logOut}); err != nil {
				return apitest.Services{}, err
			}
			g.srv = grpcserver.New(n.Raft, n.Self, g.logs.Logger().Named("api"), n.Routines, grpcserver.WithLogs(g.logs))
			return apitest.Services{Register: g.srv.Register, GRPCOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.srv.UnaryInterceptor())},
				HTTP: New(g.srv, Probes{Node: n.Raft}, g.metrics.Handler()), Close: g.srv.Close}, nil
		}})
	if err != nil {
		return nil, err
	}
	g.Node, g.node, g.http, g.self = n, n.Raft, n.HTTP, n.Self
	g.client = g.http.Client()
	g.client.Timeout = callTimeout
	return g, nil
}

func (g *gatewayNode) stop() { _ = g.Close() }

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
