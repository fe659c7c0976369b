package cluster_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
)

// metricValue reads one sample (name with its labels, as exposed) from a
// member's /metrics.
func metricValue(t *testing.T, l *cluster.Launcher, httpAddr, series string) float64 {
	t.Helper()
	resp, err := httpClient(3 * time.Second).Get(memberURL(l, httpAddr, "/metrics"))
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not exposed", series)
	return 0
}

// TestFloodPastCapsLeavesMemberServing: 5,000 idle or half-sent HTTP
// connections and 5,000 assignment watch streams against a member capped
// at 1,000 of each. The caps refuse or evict the rest (HTTP: the
// longest-waiting connections make room; watches: ResourceExhausted),
// the member's file descriptors stay bounded, and it keeps serving raft
// (it applies new writes), gRPC and HTTP.
func TestFloodPastCapsLeavesMemberServing(t *testing.T) {
	const flood, capN = 5000, 1000
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	need := uint64(2*flood + 1000) // the test's own sockets, and headroom
	if rl.Cur < need {
		if rl.Max < need {
			t.Skipf("the hard RLIMIT_NOFILE (%d) is below the %d file descriptors this test's own flood needs", rl.Max, need)
		}
		old := rl
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatalf("raise RLIMIT_NOFILE: %v", err)
		}
		t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	}
	start := time.Now()
	// Insecure on purpose (an explicit plaintext variant): the flood
	// speaks raw HTTP/1.1 on the sockets it holds open.
	l := startInsecureClusterWith(t, cluster.LauncherConfig{ExtraArgs: append([]string{
		"--http-max-conns", strconv.Itoa(capN), "--max-watchers", strconv.Itoa(capN)}, floodRaftTimeouts...)})
	m := l.Members()[0]

	// HTTP: half idle, half a request whose body never comes.
	var httpConns []net.Conn
	defer func() {
		for _, c := range httpConns {
			c.Close()
		}
	}()
	for i := 0; i < flood; i++ {
		c, err := net.DialTimeout("tcp", m.HTTPAddr, 2*time.Second)
		if err != nil {
			t.Fatalf("HTTP connection %d: %v", i, err)
		}
		if i%2 == 1 {
			_, _ = io.WriteString(c, "POST /v1/alloc/id HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
		}
		httpConns = append(httpConns, c)
	}

	// gRPC: 5,000 watch streams over 50 connections.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	var opened, exhausted, other atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < flood/100; c++ {
		conn, err := grpc.NewClient(m.GRPCAddr, dialOptions(l)...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cl := coordpb.NewChannelsClient(conn)
		for s := 0; s < 100; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := cl.WatchAssignments(wctx, &coordpb.WatchAssignmentsRequest{})
				if err == nil {
					_, err = st.Recv()
				}
				switch {
				case err == nil:
					opened.Add(1)
					for st.RecvMsg(&coordpb.AssignmentUpdate{}) == nil {
					}
				case status.Code(err) == codes.ResourceExhausted:
					exhausted.Add(1)
				default:
					other.Add(1)
				}
			}()
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for opened.Load()+exhausted.Load()+other.Load() < flood && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("watch streams: %d open, %d refused, %d other errors", opened.Load(), exhausted.Load(), other.Load())
	if opened.Load() > capN || exhausted.Load() < flood-capN || other.Load() != 0 {
		t.Fatalf("watch streams: %d open, %d ResourceExhausted, %d other; want at most %d open and the rest refused",
			opened.Load(), exhausted.Load(), other.Load(), capN)
	}

	// Raft and gRPC: a write through the flooded member commits, and the
	// member applies it.
	conn, err := grpc.NewClient(m.GRPCAddr, dialOptions(l)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Unavailable (an election under the flood, on a loaded machine) is
	// retried as any client would; every other error fails at once.
	for {
		_, err := coordpb.NewAllocatorClient(conn).AllocID(ctx, &coordpb.AllocIDRequest{Count: 1})
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			t.Fatalf("AllocID through the flooded member: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st, err := coordpb.NewClusterClient(conn).Status(ctx, &coordpb.StatusRequest{})
	if err != nil || st.AppliedIndex == 0 {
		t.Fatalf("Status of the flooded member: %v %v", st, err)
	}

	// HTTP: past the caps a new connection evicts the longest-waiting one
	// (or is answered 503 when none can make room); the idle and half-sent
	// connections are reaped by the read timeouts, and /healthz answers.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var lastHTTP string
	ok := false
	for until := time.Now().Add(45 * time.Second); time.Now().Before(until); time.Sleep(200 * time.Millisecond) {
		resp, err := hc.Get("http://" + m.HTTPAddr + "/healthz")
		if err != nil {
			lastHTTP = err.Error()
			continue
		}
		resp.Body.Close()
		lastHTTP = resp.Status
		if resp.StatusCode == http.StatusOK {
			ok = true
			break
		}
	}
	if !ok {
		t.Fatalf("/healthz never answered 200 under the flood (last: %s)", lastHTTP)
	}
	fds := metricValue(t, l, m.HTTPAddr, "process_open_fds")
	refusedHTTP := metricValue(t, l, m.HTTPAddr, `coordd_limit_refused_total{limit="http_connections"}`) +
		metricValue(t, l, m.HTTPAddr, `coordd_limit_refused_total{limit="http_unauthenticated_connections"}`)
	refusedWatch := metricValue(t, l, m.HTTPAddr, `coordd_limit_refused_total{limit="assignment_watchers"}`)
	t.Logf("member fds %.0f, HTTP refused %.0f, watchers refused %.0f, elapsed %v", fds, refusedHTTP, refusedWatch, time.Since(start))
	if fds > 3*capN {
		t.Errorf("the member holds %.0f file descriptors under the flood", fds)
	}
	if refusedHTTP < flood-capN || refusedWatch < flood-capN {
		t.Errorf("refusals counted: HTTP %.0f, watchers %.0f; want at least %d each", refusedHTTP, refusedWatch, flood-capN)
	}
}
