package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// LauncherConfig describes a local multi-process cluster on one host.
type LauncherConfig struct {
	Binary   string // path to the coordd binary
	DataDir  string // parent of the members' data dirs
	Nodes    int
	BasePort int    // member i: gRPC BasePort+i, raft BasePort+100+i, HTTP BasePort+1000+i
	Host     string // a loopback address, e.g. 127.0.0.1
	LogOut   io.Writer
	// ExtraArgs are appended to every member's command line.
	ExtraArgs []string
}

// LocalMember is one member of a launched cluster.
type LocalMember struct {
	ID, RaftAddr, GRPCAddr, HTTPAddr, DataDir string
}

// Launcher starts, kills and restarts coordd processes. It is what
// `coordd dev` runs, and what multi-process tests drive.
type Launcher struct {
	cfg     LauncherConfig
	members []LocalMember

	mu     sync.Mutex
	procs  []*proc
	exited chan error
	// stopping is set once Stop begins, so deliberate exits are not reported.
	stopping bool
}

// proc is one running member process; done closes when it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// NewLauncher plans the members; nothing starts until Start.
func NewLauncher(cfg LauncherConfig) *Launcher {
	if cfg.LogOut == nil {
		cfg.LogOut = io.Discard
	}
	l := &Launcher{cfg: cfg, exited: make(chan error, cfg.Nodes), procs: make([]*proc, cfg.Nodes)}
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
	return l
}

// Members lists the planned members.
func (l *Launcher) Members() []LocalMember { return l.members }

// Endpoints is the comma-separated gRPC address list for clients.
func (l *Launcher) Endpoints() string {
	var eps []string
	for _, m := range l.members {
		eps = append(eps, m.GRPCAddr)
	}
	return strings.Join(eps, ",")
}

// Exited reports members that exit without being asked to.
func (l *Launcher) Exited() <-chan error { return l.exited }

func (l *Launcher) peers() string {
	var ps []string
	for _, m := range l.members {
		ps = append(ps, m.ID+"="+m.RaftAddr)
	}
	return strings.Join(ps, ",")
}

// Start launches every member and waits until each reports ready.
func (l *Launcher) Start(ctx context.Context) error {
	for i := range l.members {
		if err := l.StartMember(i); err != nil {
			l.Stop()
			return err
		}
	}
	for i := range l.members {
		if err := l.WaitReady(ctx, i, 30*time.Second); err != nil {
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
	if err := os.MkdirAll(m.DataDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", m.DataDir, err)
	}
	logf, err := os.OpenFile(filepath.Join(m.DataDir, "coordd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open member log: %w", err)
	}
	args := append([]string{"serve",
		"--id", m.ID, "--data-dir", m.DataDir,
		"--raft-addr", m.RaftAddr, "--grpc-addr", m.GRPCAddr, "--http-addr", m.HTTPAddr,
		"--peers", l.peers()}, l.cfg.ExtraArgs...)
	cmd := exec.Command(l.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", m.ID, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	l.mu.Lock()
	l.procs[i] = p
	l.mu.Unlock()
	go func() {
		err := cmd.Wait()
		close(p.done)
		logf.Close()
		l.mu.Lock()
		deliberate := l.stopping || l.procs[i] != p
		if !deliberate {
			l.procs[i] = nil
		}
		l.mu.Unlock()
		if !deliberate {
			select {
			case l.exited <- fmt.Errorf("member %s exited: %v (log: %s)", m.ID, err, filepath.Join(m.DataDir, "coordd.log")):
			default:
			}
		}
	}()
	return nil
}

// WaitReady polls member i's /readyz until it answers 200.
func (l *Launcher) WaitReady(ctx context.Context, i int, timeout time.Duration) error {
	m := l.members[i]
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		resp, err := client.Get("http://" + m.HTTPAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("member %s not ready within %v (log: %s)", m.ID, timeout, filepath.Join(m.DataDir, "coordd.log"))
}

// Signal sends sig to member i's process (SIGKILL, SIGSTOP, SIGCONT, ...).
// After SIGKILL the member counts as stopped until StartMember.
func (l *Launcher) Signal(i int, sig syscall.Signal) error {
	l.mu.Lock()
	p := l.procs[i]
	if sig == syscall.SIGKILL {
		l.procs[i] = nil
	}
	l.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: %s", ErrNotRunning, l.members[i].ID)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %s: %w", l.members[i].ID, err)
	}
	if sig == syscall.SIGKILL {
		<-p.done
	}
	return nil
}

// Kill SIGKILLs member i and waits for it to die.
func (l *Launcher) Kill(i int) error { return l.Signal(i, syscall.SIGKILL) }

// Stop terminates every member: SIGTERM, then SIGKILL after 5 s.
func (l *Launcher) Stop() {
	l.mu.Lock()
	l.stopping = true
	procs := append([]*proc(nil), l.procs...)
	for i := range l.procs {
		l.procs[i] = nil
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused member cannot exit
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}()
	}
	wg.Wait()
}

// ErrNotRunning is returned for operations on a stopped member.
var ErrNotRunning = errors.New("member is not running")
