package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	supervise "github.com/coordd/coordd/proc"
	"github.com/coordd/coordd/security"
)

// LauncherConfig describes a local multi-process cluster on one host:
// coordd members and, optionally, reference streaming nodes.
type LauncherConfig struct {
	Binary   string // path to the coordd binary
	DataDir  string // parent of every process's data dir
	Nodes    int
	BasePort int    // member i: gRPC BasePort+i, raft BasePort+100+i, HTTP BasePort+1000+i; streaming node i: BasePort+200+i
	Host     string // a loopback address, e.g. 127.0.0.1
	LogOut   io.Writer
	// ExtraArgs are appended to every member's command line.
	ExtraArgs []string
	// MemberArgs, when set, adds per-member arguments (e.g. --raft-dial
	// routing each raft link through a fault proxy).
	MemberArgs func(i int) []string

	StreamingNodes     int
	StreamingBinary    string   // path to the streamingnode binary
	StreamingExtraArgs []string // appended to every streaming node's command line
	// StreamingMetrics: streaming node i serves Prometheus metrics on
	// BasePort+1200+i (--metrics-addr).
	StreamingMetrics bool

	// Security, when set, runs every process with TLS and authentication
	// (`coordd dev --secure`); nil runs them with --insecure.
	Security *LaunchSecurity

	// ReadyTimeout bounds Start's wait for each member's /readyz
	// (DefaultReadyTimeout when 0). Tests scale it for a loaded machine;
	// the launcher itself reads no test settings, since `coordd dev` and
	// the benchmarks run it too.
	ReadyTimeout time.Duration
}

// DefaultReadyTimeout is how long Start waits for each member to become
// ready unless LauncherConfig.ReadyTimeout says otherwise.
const DefaultReadyTimeout = 30 * time.Second

// LaunchSecurity is the TLS material and bootstrap token of a secure
// launched cluster (security.WriteDevPKI writes a matching set).
type LaunchSecurity struct {
	Server security.Files // every member's server certificate (unless Servers names one)
	// Servers, when set, gives member i its own server certificate
	// (Servers[i]); members beyond it use Server.
	Servers []security.Files
	// Nodes[i] is streaming node i's client certificate, bound to node
	// identity i+1 (security.CA.IssueNode; security.DevPKI.Nodes): each
	// streaming node may speak only for the sessions it registers.
	Nodes              []security.Files
	BootstrapTokenFile string
}

// server is member i's certificate.
func (s *LaunchSecurity) server(i int) security.Files {
	if i >= 0 && i < len(s.Servers) {
		return s.Servers[i]
	}
	return s.Server
}

// MemberArgs are the security flags of member i (--insecure without
// security), for members a test starts outside the launcher too.
func (s *LaunchSecurity) MemberArgs(i int) []string {
	if s == nil {
		return []string{"--insecure"}
	}
	f := s.server(i)
	args := []string{"--insecure=false", "--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key}
	if s.BootstrapTokenFile != "" {
		args = append(args, "--bootstrap-token-file", s.BootstrapTokenFile)
	}
	return args
}

// streamingArgs are the security flags of streaming node i (0-based).
func (s *LaunchSecurity) streamingArgs(i int) ([]string, error) {
	if s == nil {
		return nil, nil
	}
	if i >= len(s.Nodes) {
		return nil, fmt.Errorf("streaming node %d has no node certificate (LaunchSecurity.Nodes holds %d)", i+1, len(s.Nodes))
	}
	n := s.Nodes[i]
	return []string{"--tls-ca", n.CA, "--tls-cert", n.Cert, "--tls-key", n.Key}, nil
}

// httpClient is how the launcher probes members' /readyz.
func (s *LaunchSecurity) httpClient() (*http.Client, string, error) {
	if s == nil {
		return &http.Client{Timeout: time.Second}, "http://", nil
	}
	m, err := security.Load(security.Files{CA: s.server(0).CA})
	if err != nil {
		return nil, "", err
	}
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: m.APIClient("")}}, "https://", nil
}

// LocalMember is one coordd member of a launched cluster.
type LocalMember struct {
	ID, RaftAddr, GRPCAddr, HTTPAddr, DataDir string
}

// LocalStreamingNode is one streaming node of a launched cluster.
type LocalStreamingNode struct {
	Name, Addr, DataDir string
	MetricsAddr         string // "" unless LauncherConfig.StreamingMetrics
}

// ExitError is what Exited reports: a process exited without being asked
// to. Err is the wait error (nil for a clean exit status 0).
type ExitError struct {
	Name string // n1.., sn1..
	Err  error
	Log  string // the process's log file
}

func (e *ExitError) Error() string {
	status := "exit status 0"
	if e.Err != nil {
		status = e.Err.Error()
	}
	return fmt.Sprintf("%s exited: %s (log: %s)", e.Name, status, e.Log)
}

func (e *ExitError) Unwrap() error { return e.Err }

// ErrNotRunning is returned for operations on a stopped process.
var ErrNotRunning = errors.New("process is not running")

// Launcher starts, signals and restarts local processes. It is what
// `coordd dev` runs, and what multi-process tests drive.
type Launcher struct {
	cfg     LauncherConfig
	members []LocalMember
	sns     []LocalStreamingNode

	mu       sync.Mutex
	procs    map[string]*supervise.Child // by process name: n1.., sn1..
	exited   chan error
	stopping bool // set once Stop begins, so deliberate exits are not reported
}

// NewLauncher plans the processes; nothing starts until Start.
func NewLauncher(cfg LauncherConfig) *Launcher {
	if cfg.LogOut == nil {
		cfg.LogOut = io.Discard
	}
	l := &Launcher{cfg: cfg, exited: make(chan error, cfg.Nodes+cfg.StreamingNodes), procs: map[string]*supervise.Child{}}
	for i := 0; i < cfg.Nodes; i++ {
		id := fmt.Sprintf("n%d", i+1)
		l.members = append(l.members, LocalMember{
			ID:       id,
			GRPCAddr: fmt.Sprintf("%s:%d", cfg.Host, cfg.BasePort+i),
			RaftAddr: fmt.Sprintf("%s:%d", cfg.Host, cfg.BasePort+100+i),
			HTTPAddr: fmt.Sprintf("%s:%d", cfg.Host, cfg.BasePort+1000+i),
			DataDir:  filepath.Join(cfg.DataDir, id),
		})
	}
	for i := 0; i < cfg.StreamingNodes; i++ {
		name := fmt.Sprintf("sn%d", i+1)
		sn := LocalStreamingNode{
			Name: name, Addr: fmt.Sprintf("%s:%d", cfg.Host, cfg.BasePort+200+i), DataDir: filepath.Join(cfg.DataDir, name),
		}
		if cfg.StreamingMetrics {
			sn.MetricsAddr = fmt.Sprintf("%s:%d", cfg.Host, cfg.BasePort+1200+i)
		}
		l.sns = append(l.sns, sn)
	}
	return l
}

// Security is the cluster's TLS material and bootstrap token (nil: every
// process runs --insecure).
func (l *Launcher) Security() *LaunchSecurity { return l.cfg.Security }

// Members lists the planned coordd members.
func (l *Launcher) Members() []LocalMember { return l.members }

// StreamingNodes lists the planned streaming nodes.
func (l *Launcher) StreamingNodes() []LocalStreamingNode { return l.sns }

// ObjectStoreDir is the object store every member writes manifest
// revisions to: the streaming nodes' default binlog store.
func (l *Launcher) ObjectStoreDir() string { return filepath.Join(l.cfg.DataDir, "objects") }

// WALDir is the WAL directory shared by every streaming node.
func (l *Launcher) WALDir() string { return filepath.Join(l.cfg.DataDir, "wal") }

// Endpoints is the comma-separated gRPC address list for clients.
func (l *Launcher) Endpoints() string {
	var eps []string
	for _, m := range l.members {
		eps = append(eps, m.GRPCAddr)
	}
	return strings.Join(eps, ",")
}

// Exited reports processes that exit without being asked to.
func (l *Launcher) Exited() <-chan error { return l.exited }

func (l *Launcher) peers() string {
	var ps []string
	for _, m := range l.members {
		ps = append(ps, m.ID+"="+m.RaftAddr)
	}
	return strings.Join(ps, ",")
}

// Start launches every member, waits until each reports ready (each
// within LauncherConfig.ReadyTimeout), then starts the streaming nodes.
func (l *Launcher) Start(ctx context.Context) error {
	for i := range l.members {
		if err := l.StartMember(i); err != nil {
			l.Stop()
			return err
		}
	}
	wait := l.cfg.ReadyTimeout
	if wait <= 0 {
		wait = DefaultReadyTimeout
	}
	for i := range l.members {
		if err := l.WaitReady(ctx, i, wait); err != nil {
			l.Stop()
			return err
		}
	}
	for i := range l.sns {
		if err := l.StartStreamingNode(i); err != nil {
			l.Stop()
			return err
		}
	}
	return nil
}

// StartMember starts member i (again, after a kill: same data dir, so it
// restarts rather than bootstraps).
func (l *Launcher) StartMember(i int) error {
	m := l.members[i]
	args := append([]string{"serve",
		"--id", m.ID, "--data-dir", m.DataDir,
		"--raft-addr", m.RaftAddr, "--grpc-addr", m.GRPCAddr, "--http-addr", m.HTTPAddr,
		"--peers", l.peers(), "--object-store", l.ObjectStoreDir()}, append(l.cfg.Security.MemberArgs(i), l.cfg.ExtraArgs...)...)
	if l.cfg.MemberArgs != nil {
		args = append(args, l.cfg.MemberArgs(i)...)
	}
	return l.start(m.ID, m.DataDir, "coordd.log", l.cfg.Binary, args)
}

// StartStreamingNode starts streaming node i (again, after a kill).
func (l *Launcher) StartStreamingNode(i int) error {
	sn := l.sns[i]
	if err := os.MkdirAll(l.WALDir(), 0o755); err != nil {
		return fmt.Errorf("create wal dir: %w", err)
	}
	args := []string{"--coord", l.Endpoints(), "--addr", sn.Addr, "--wal-dir", l.WALDir(), "--data-dir", sn.DataDir}
	if sn.MetricsAddr != "" {
		args = append(args, "--metrics-addr", sn.MetricsAddr)
	}
	sec, err := l.cfg.Security.streamingArgs(i)
	if err != nil {
		return err
	}
	args = append(args, sec...)
	args = append(args, l.cfg.StreamingExtraArgs...)
	return l.start(sn.Name, sn.DataDir, "streamingnode.log", l.cfg.StreamingBinary, args)
}

func (l *Launcher) start(name, dir, logName, binary string, args []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	logPath := filepath.Join(dir, logName)
	var p *supervise.Child
	l.mu.Lock()
	defer l.mu.Unlock()
	p, err := supervise.Start(supervise.Spec{Name: name, Path: binary, Args: args, Log: logPath}, func(err error) {
		l.mu.Lock()
		deliberate := l.stopping || l.procs[name] != p
		if !deliberate {
			delete(l.procs, name)
		}
		l.mu.Unlock()
		if !deliberate {
			select {
			case l.exited <- &ExitError{Name: name, Err: err, Log: logPath}:
			default:
			}
		}
	})
	if err != nil {
		return err
	}
	l.procs[name] = p
	return nil
}

// Restart starts the process called name (a member "n1".. or a streaming
// node "sn1..") again, as StartMember or StartStreamingNode would; it is an
// error if that process is running.
func (l *Launcher) Restart(name string) error {
	l.mu.Lock()
	_, running := l.procs[name]
	stopping := l.stopping
	l.mu.Unlock()
	if running {
		return fmt.Errorf("%s is still running", name)
	}
	if stopping {
		return fmt.Errorf("%s: the launcher is stopping", name)
	}
	for i, m := range l.members {
		if m.ID == name {
			return l.StartMember(i)
		}
	}
	for i, sn := range l.sns {
		if sn.Name == name {
			return l.StartStreamingNode(i)
		}
	}
	return fmt.Errorf("no process called %q", name)
}

// Pid is the process ID of the running process called name, or 0.
func (l *Launcher) Pid(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.procs[name]; p != nil {
		return p.Process.Pid
	}
	return 0
}

// LogPath is where the process called name logs (its data dir's
// coordd.log or streamingnode.log); "" for an unknown name.
func (l *Launcher) LogPath(name string) string {
	for _, m := range l.members {
		if m.ID == name {
			return filepath.Join(m.DataDir, "coordd.log")
		}
	}
	for _, sn := range l.sns {
		if sn.Name == name {
			return filepath.Join(sn.DataDir, "streamingnode.log")
		}
	}
	return ""
}

// WaitReady polls member i's /readyz until it answers 200.
func (l *Launcher) WaitReady(ctx context.Context, i int, timeout time.Duration) error {
	m := l.members[i]
	deadline := time.Now().Add(timeout)
	client, scheme, err := l.cfg.Security.httpClient()
	if err != nil {
		return fmt.Errorf("member %s readiness probe: %w", m.ID, err)
	}
	for time.Now().Before(deadline) {
		resp, err := client.Get(scheme + m.HTTPAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %s not ready: %w (log: %s)", m.ID, ctx.Err(), l.LogPath(m.ID))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("member %s not ready within %v (log: %s)", m.ID, timeout, l.LogPath(m.ID))
}

// Signal sends sig to member i (SIGKILL, SIGSTOP, SIGCONT, ...). After
// SIGKILL the member counts as stopped until StartMember.
func (l *Launcher) Signal(i int, sig syscall.Signal) error { return l.signal(l.members[i].ID, sig) }

// Kill SIGKILLs member i and waits for it to die.
func (l *Launcher) Kill(i int) error { return l.signal(l.members[i].ID, syscall.SIGKILL) }

// SignalStreamingNode sends sig to streaming node i.
func (l *Launcher) SignalStreamingNode(i int, sig syscall.Signal) error {
	return l.signal(l.sns[i].Name, sig)
}

// KillStreamingNode SIGKILLs streaming node i and waits for it to die.
func (l *Launcher) KillStreamingNode(i int) error { return l.signal(l.sns[i].Name, syscall.SIGKILL) }

// StopStreamingNode sends SIGTERM (controlled shutdown) and waits up to
// grace for the process to exit, then SIGKILLs it.
func (l *Launcher) StopStreamingNode(i int, grace time.Duration) error {
	name := l.sns[i].Name
	l.mu.Lock()
	p := l.procs[name]
	delete(l.procs, name)
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: %s", ErrNotRunning, name)
	}
	if err := p.Stop(grace); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (l *Launcher) signal(name string, sig syscall.Signal) error {
	l.mu.Lock()
	p := l.procs[name]
	if sig == syscall.SIGKILL {
		delete(l.procs, name)
	}
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: %s", ErrNotRunning, name)
	}
	if sig == syscall.SIGKILL {
		// Continued first if paused, as every launcher does (package proc).
		if err := p.Kill(time.Minute); err != nil {
			return fmt.Errorf("kill %s: %w", name, err)
		}
		return nil
	}
	if err := p.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s: %w", name, err)
	}
	if sig == syscall.SIGSTOP {
		// The signal is delivered asynchronously: a process woken from a
		// blocking call (a flock another process just released, say)
		// completes that call before it stops. Answer only once it has
		// stopped, so a caller that releases something right after the
		// pause cannot race it.
		if err := waitStopped(p.Process.Pid, 10*time.Second); err != nil {
			return fmt.Errorf("pause %s: %w", name, err)
		}
	}
	return nil
}

// waitStopped waits until process pid is stopped (state T in
// /proc/PID/stat). Where /proc is not there, it returns at once.
func waitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := supervise.Stopped(pid)
		if err != nil {
			return nil // no procfs: nothing to wait on
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped after %v", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Stop terminates every process: SIGTERM (streaming nodes first, so they
// can hand their channels back), then SIGKILL after 5 s.
func (l *Launcher) Stop() {
	l.mu.Lock()
	l.stopping = true
	procs := l.procs
	l.procs = map[string]*supervise.Child{}
	l.mu.Unlock()
	stop := func(names func(string) bool) {
		var wg sync.WaitGroup
		for name, p := range procs {
			if !names(name) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = p.Stop(5 * time.Second)
			}()
		}
		wg.Wait()
	}
	stop(func(n string) bool { return strings.HasPrefix(n, "sn") })
	stop(func(n string) bool { return !strings.HasPrefix(n, "sn") })
}
