//go:build test

package milvusconformance

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// The coordd binaries the tests run, built once by TestMain from the
// repository this module sits in.
var coorddBinary, streamingBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "milvusconformance-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	coorddBinary, streamingBinary = filepath.Join(dir, "coordd"), filepath.Join(dir, "streamingnode")
	for bin, pkg := range map[string]string{coorddBinary: "./cmd/coordd", streamingBinary: "./cmd/streamingnode"} {
		cmd := exec.Command("go", "build", "-tags", "hashicorpmetrics", "-o", bin, pkg)
		cmd.Dir = ".." // the coordd module
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(2)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// scaled stretches a wait bound on a loaded machine (COORDD_TEST_SCALE,
// default 1): the same knob as the coordd module's multi-process tests.
func scaled(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("COORDD_TEST_SCALE"), 64); err == nil && f > 1 {
		return time.Duration(float64(d) * f)
	}
	return d
}

// devCluster is a running `coordd dev --secure`: three members, two
// streaming nodes, TLS on every port and tokens, on loopback ports from
// base.
type devCluster struct {
	base    int
	dataDir string
	banner  string
	pkiDir  string
	token   string
	mu      sync.Mutex
	out     strings.Builder
}

func freeBase(t *testing.T) int {
	t.Helper()
	for base := 21000 + os.Getpid()%300*60; base < 60000; base += 41 {
		ok := true
		for i := 0; i < 3 && ok; i++ {
			for _, p := range []int{base + i, base + 100 + i, base + 200 + i, base + 1000 + i, base + 1200 + i} {
				l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
				if err != nil {
					ok = false
					break
				}
				l.Close()
			}
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port block on 127.0.0.1")
	return 0
}

// startDev starts the cluster and waits for its banner; t.Cleanup stops it
// (and prints its output when the test failed).
func startDev(t *testing.T) *devCluster {
	t.Helper()
	c := &devCluster{base: freeBase(t), dataDir: t.TempDir()}
	c.pkiDir = filepath.Join(c.dataDir, "pki")
	cmd := exec.Command(coorddBinary, "dev", "--secure", "--data-dir", c.dataDir, "--base-port", strconv.Itoa(c.base),
		"--streamingnode-binary", streamingBinary, "--nodes", "3", "--streaming-nodes", "2")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("--- coordd dev output ---\n%s", c.output())
			for _, n := range []string{"n1/coordd.log", "n2/coordd.log", "n3/coordd.log", "sn1/streamingnode.log", "sn2/streamingnode.log"} {
				if b, err := os.ReadFile(filepath.Join(c.dataDir, n)); err == nil {
					t.Logf("--- %s (last 40 lines) ---\n%s", n, lastLines(string(b), 40))
				}
			}
		}
	})
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.mu.Lock()
			c.out.WriteString(sc.Text() + "\n")
			text := c.out.String()
			c.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "try:") {
				up <- text
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case c.banner = <-up:
	case <-exited:
		t.Fatalf("coordd dev exited before it was up:\n%s", c.output())
	case <-time.After(scaled(90 * time.Second)):
		t.Fatalf("coordd dev was not up in time:\n%s", c.output())
	}
	tok, err := os.ReadFile(filepath.Join(c.pkiDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	c.token = strings.TrimSpace(string(tok))
	return c
}

func (c *devCluster) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// pid is the PID the banner gives for a process ("n1", "sn2", ...).
func (c *devCluster) pid(t *testing.T, name string) int {
	t.Helper()
	for _, line := range strings.Split(c.banner, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != name {
			continue
		}
		for i := range f[:len(f)-1] {
			if f[i] == "pid" {
				if p, err := strconv.Atoi(f[i+1]); err == nil && p > 0 {
					return p
				}
			}
		}
	}
	t.Fatalf("the banner gives no pid for %s:\n%s", name, c.banner)
	return 0
}

func (c *devCluster) signal(t *testing.T, name string, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(c.pid(t, name), sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, name, err)
	}
}

// memberAddr is member i's (1-based) gRPC address; snAddr streaming node
// i's.
func (c *devCluster) memberAddr(i int) string { return fmt.Sprintf("127.0.0.1:%d", c.base+i-1) }
func (c *devCluster) snAddr(i int) string     { return fmt.Sprintf("127.0.0.1:%d", c.base+200+i-1) }

// tlsConfig trusts the dev CA and presents the certificate named cert
// ("proxy", "node-1", ...; "" for none).
func (c *devCluster) tlsConfig(t *testing.T, cert string) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(c.pkiDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(filepath.Join(c.pkiDir, cert+".crt"), filepath.Join(c.pkiDir, cert+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg
}

// bearer is a token sent with every call (the admin token here).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return true }

// dial connects to member i as cred: "admin" (the admin token), or a
// certificate name ("proxy", "node-1", "node-2").
func (c *devCluster) dial(t *testing.T, i int, cred string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{}
	if cred == "admin" {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(c.tlsConfig(t, ""))), grpc.WithPerRPCCredentials(bearer(c.token)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(c.tlsConfig(t, cred))))
	}
	conn, err := grpc.NewClient(c.memberAddr(i), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// getJSON reads coordd's own HTTP API of member i with the admin token
// (test orchestration only: the calls under test are Milvus's).
func (c *devCluster) getJSON(t *testing.T, i int, path string) (map[string]any, error) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: c.tlsConfig(t, "")}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", c.base+1000+i-1, path), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	var out map[string]any
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// field reads key from m in protojson's camelCase or proto spelling.
func field(m map[string]any, camel, proto string) any {
	if v, ok := m[camel]; ok {
		return v
	}
	return m[proto]
}

// leader is the 1-based index of the member that leads now, asked of
// every member until one knows.
func (c *devCluster) leader(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(scaled(60 * time.Second))
	for time.Now().Before(deadline) {
		for i := 1; i <= 3; i++ {
			st, err := c.getJSON(t, i, "/v1/cluster/status")
			if err != nil {
				continue
			}
			if id, _ := field(st, "leaderId", "leader_id").(string); strings.HasPrefix(id, "n") {
				if n, err := strconv.Atoi(id[1:]); err == nil && n >= 1 && n <= 3 {
					return n
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no member knows a leader")
	return 0
}

// pendingBroadcasts counts the PENDING broadcast tasks (asked of member i).
func (c *devCluster) pendingBroadcasts(t *testing.T, i int) (int, error) {
	t.Helper()
	m, err := c.getJSON(t, i, "/v1/broadcasts")
	if err != nil {
		return 0, err
	}
	list, _ := m["broadcasts"].([]any)
	n := 0
	for _, b := range list {
		if bm, ok := b.(map[string]any); ok && bm["state"] == "PENDING" {
			n++
		}
	}
	return n, nil
}

// eventually polls cond every 200 ms until it holds or bound (scaled) ends.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(scaled(bound))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", scaled(bound), what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// countBroadcasts counts the tasks of a message type (asked of member i).
func (c *devCluster) countBroadcasts(t *testing.T, i int, typ string) int {
	t.Helper()
	m, err := c.getJSON(t, i, "/v1/broadcasts")
	if err != nil {
		t.Fatal(err)
	}
	list, _ := m["broadcasts"].([]any)
	n := 0
	for _, b := range list {
		if bm, ok := b.(map[string]any); ok && field(bm, "messageType", "message_type") == typ {
			n++
		}
	}
	return n
}
