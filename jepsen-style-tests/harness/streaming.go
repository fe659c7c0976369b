package harness

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	supervise "github.com/coordd/coordd/proc"
)

var (
	snOnce  sync.Once
	snBin   string
	snBuild error
)

// BuildStreamingNode compiles cmd/streamingnode once per test process
// (into the same temporary directory as coordd when there is one).
// JEPSEN_STREAMINGNODE_BIN skips the build and uses that binary (e.g. one
// built from an older commit, to see a checker catch a fixed defect).
func BuildStreamingNode() (string, error) {
	snOnce.Do(func() {
		if bin := os.Getenv("JEPSEN_STREAMINGNODE_BIN"); bin != "" {
			snBin = bin
			return
		}
		dir := buildDir
		if dir == "" {
			var err error
			if dir, err = os.MkdirTemp("", "coordd-jepsen-sn-"); err != nil {
				snBuild = err
				return
			}
			buildDir = dir
		}
		out := filepath.Join(dir, "streamingnode")
		args := []string{"build", "-tags", "hashicorpmetrics"}
		if os.Getenv("JEPSEN_RACE") == "1" {
			args = append(args, "-race")
		}
		args = append(args, "-o", out, "github.com/coordd/coordd/cmd/streamingnode")
		if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			snBuild = fmt.Errorf("go %v: %v\n%s", args, err, b)
			return
		}
		snBin = out
	})
	return snBin, snBuild
}

// StreamingNodes are streaming node processes sharing one WAL directory,
// registered with a Cluster's members. Each keeps its address (a fixed
// loopback port) across restarts.
type StreamingNodes struct {
	procTable
	bin    string
	coord  string
	WALDir string
	extra  []string // more command-line arguments for every node
	sec    *Security
	addrs  []string
	dirs   []string
}

// StartStreamingNodes launches n streaming nodes against c (WAL dir and
// data dirs under dir, extra arguments for each) and registers teardown
// with t.Cleanup.
func StartStreamingNodes(t testing.TB, c *Cluster, n int, dir string, extra ...string) (*StreamingNodes, error) {
	bin, err := BuildStreamingNode()
	if err != nil {
		return nil, err
	}
	s := &StreamingNodes{procTable: newProcTable(t, c.t0, n), bin: bin, coord: strings.Join(c.Endpoints(0), ","),
		WALDir: filepath.Join(dir, "wal"), extra: extra, sec: c.sec}
	if err := os.MkdirAll(s.WALDir, 0o755); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		s.addrs = append(s.addrs, l.Addr().String())
		l.Close()
		d := filepath.Join(dir, fmt.Sprintf("sn%d", i+1))
		s.dirs = append(s.dirs, d)
		s.ids[i], s.logs[i] = s.ID(i), filepath.Join(dir, fmt.Sprintf("sn%d.log", i+1))
	}
	t.Cleanup(s.Close)
	for i := 0; i < n; i++ {
		if err := s.Start(i); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// N is the number of streaming nodes.
func (s *StreamingNodes) N() int { return len(s.addrs) }

// ID names streaming node i ("sn1", ...).
func (s *StreamingNodes) ID(i int) string { return fmt.Sprintf("sn%d", i+1) }

// Addr is streaming node i's gRPC address.
func (s *StreamingNodes) Addr(i int) string { return s.addrs[i] }

// Start starts streaming node i (again).
func (s *StreamingNodes) Start(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.dirs[i], 0o755); err != nil {
		return err
	}
	args := append([]string{"--coord", s.coord, "--addr", s.addrs[i], "--wal-dir", s.WALDir,
		"--data-dir", s.dirs[i], "--heartbeat-interval", "250ms", "--drain-timeout", "2s"}, s.sec.StreamingArgs(i)...)
	args = append(args, s.extra...)
	_, err := s.startLocked(i, supervise.Spec{Path: s.bin, Args: args, Banner: s.banner(i, "starting")}, false, nil)
	return err
}

// Heal resumes paused nodes and restarts stopped ones.
func (s *StreamingNodes) Heal() error {
	var errs []error
	for i := range s.addrs {
		switch s.State(i) {
		case Paused:
			errs = append(errs, s.Resume(i))
		case Stopped:
			errs = append(errs, s.Start(i))
		}
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// LogProblems scans the streaming node logs for panics and races.
func (s *StreamingNodes) LogProblems() []string {
	var out []string
	for i, path := range s.logs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, pat := range []string{"panic:", "fatal error:", "WARNING: DATA RACE"} {
				if strings.Contains(line, pat) {
					out = append(out, fmt.Sprintf("%s:%d: %s", s.ID(i), n+1, strings.TrimSpace(line)))
				}
			}
		}
	}
	return out
}

// CopyLogs copies the streaming node logs into dir.
func (s *StreamingNodes) CopyLogs(dir string) {
	for i, path := range s.logs {
		if b, err := os.ReadFile(path); err == nil {
			_ = os.WriteFile(filepath.Join(dir, s.ID(i)+".log"), b, 0o644)
		}
	}
}

// Close kills every streaming node. Safe to call twice.
func (s *StreamingNodes) Close() {
	for i := range s.addrs {
		_ = s.Kill(i)
	}
}
