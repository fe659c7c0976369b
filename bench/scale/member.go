package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/proc"
)

// member is one `coordd serve` process of the run, over real TCP on
// loopback, with its own data dir; it is started, killed with SIGKILL and
// started again by the run (a restart keeps the data dir, a replacement
// empties it and joins).
type member struct {
	id, dir, binary              string
	raftAddr, grpcAddr, httpAddr string
	extra                        []string // flags every start adds

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	conn *grpc.ClientConn
}

// freePort is a loopback port nothing listens on right now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func newMember(binary, root, id string, extra []string) (*member, error) {
	m := &member{id: id, dir: filepath.Join(root, id), binary: binary, extra: extra}
	for _, a := range []*string{&m.raftAddr, &m.grpcAddr, &m.httpAddr} {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		*a = p
	}
	c, err := grpc.NewClient(m.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", id, err)
	}
	m.conn = c
	return m, nil
}

// start launches the member; join, when set, is a running member's gRPC
// address (an empty data dir joins through it).
func (m *member) start(join, objects string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return fmt.Errorf("member %s is running", m.id)
	}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", m.dir, err)
	}
	args := []string{"serve", "--insecure", "--id", m.id, "--data-dir", m.dir, "--raft-addr", m.raftAddr,
		"--grpc-addr", m.grpcAddr, "--http-addr", m.httpAddr, "--object-store", objects}
	if join != "" {
		args = append(args, "--join", join)
	}
	args = append(args, m.extra...)
	log, err := os.OpenFile(filepath.Join(filepath.Dir(m.dir), m.id+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open %s's log: %w", m.id, err)
	}
	fmt.Fprintf(log, "==== %s start: %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), m.binary, strings.Join(args, " "))
	cmd := exec.Command(m.binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", m.id, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	m.cmd, m.done = cmd, done
	return nil
}

// kill sends SIGKILL (or SIGTERM when graceful) and waits for the exit.
func (m *member) kill(graceful bool) {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	sig := syscall.SIGKILL
	if graceful {
		sig = syscall.SIGTERM
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (m *member) pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

func (m *member) running() bool { return m.pid() != 0 }

// ready: /readyz answers 200 (a leader is known and this member is caught
// up, docs/operations.md).
// readiness is /readyz's verdict and its status text ("" when the member
// does not answer HTTP yet).
func (m *member) readiness() (bool, string) {
	c := &http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + m.httpAddr + "/readyz")
	if err != nil {
		return false, ""
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode == http.StatusOK, body.Status
}

// waitReady polls /readyz every 50 ms until it answers 200 or timeout.
func (m *member) waitReady(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	d, _, err := m.waitReadyTraced(ctx, timeout)
	return d, err
}

// waitReadyTraced is waitReady that also returns the phases the member
// went through on its way: each change of /readyz's status (numbers
// masked, so a shrinking lag is one phase) with the time it was first
// seen, e.g. "0.0s no HTTP", "9.8s no leader known", "12.1s 48213 entries
// behind".
func (m *member) waitReadyTraced(ctx context.Context, timeout time.Duration) (time.Duration, []string, error) {
	start := time.Now()
	var trace []string
	last := "\x00"
	for time.Since(start) < timeout {
		if !m.running() {
			return time.Since(start), trace, fmt.Errorf("member %s exited (log: %s.log)", m.id, m.dir)
		}
		ok, status := m.readiness()
		if ok {
			trace = append(trace, fmt.Sprintf("%.1fs ready", time.Since(start).Seconds()))
			return time.Since(start), trace, nil
		}
		if status == "" {
			status = "no HTTP"
		}
		if shape := digits.ReplaceAllString(status, "N"); shape != last {
			last = shape
			trace = append(trace, fmt.Sprintf("%.1fs %s", time.Since(start).Seconds(), truncate(status, 100)))
		}
		select {
		case <-ctx.Done():
			return time.Since(start), trace, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return time.Since(start), trace, fmt.Errorf("member %s not ready within %v (log: %s.log)", m.id, timeout, m.dir)
}

var digits = regexp.MustCompile(`[0-9]+`)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (m *member) status(ctx context.Context) (*coordpb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return coordpb.NewClusterClient(m.conn).Status(ctx, &coordpb.StatusRequest{})
}

// metrics scrapes the member's /metrics into name{labels} -> value.
func (m *member) metrics() (map[string]float64, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + m.httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				out[line[:i]] = v
			}
		}
	}
	return out, sc.Err()
}

// rssMiB is the process's resident set in MiB (0 when it cannot be read).
func rssMiB(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := proc.RSSBytes(pid)
	if err != nil {
		return 0
	}
	return float64(b) / (1 << 20)
}

// cpuSeconds is the process's user+system CPU time (0 when it cannot be
// read).
func cpuSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	s, err := proc.CPUSeconds(pid)
	if err != nil {
		return 0
	}
	return s
}
