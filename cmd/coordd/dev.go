package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/security"
)

type devConfig struct {
	DataDir         string
	Nodes           int
	BasePort        int
	StreamingNodes  int
	StreamingBinary string
	Secure          bool
	// Restart restarts a process that exits without being asked to, after
	// RestartDelay; off, the exit is reported and the rest keep running.
	Restart      bool
	RestartDelay time.Duration
}

func parseDevFlags(args []string, stderr io.Writer) (devConfig, error) {
	fs := flag.NewFlagSet("coordd dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c devConfig
	fs.StringVar(&c.DataDir, "data-dir", "./data/dev", "parent directory of the members' data dirs")
	fs.IntVar(&c.Nodes, "nodes", 3, "number of members (1, 3 or 5)")
	fs.IntVar(&c.BasePort, "base-port", 7001, "member i listens on gRPC base+i-1, HTTP base+1000+i-1, raft base+100+i-1; streaming node i on base+200+i-1, its metrics on base+1200+i-1")
	fs.IntVar(&c.StreamingNodes, "streaming-nodes", 2, "reference streaming nodes to start beside the cluster (0..16)")
	fs.StringVar(&c.StreamingBinary, "streamingnode-binary", "", "streamingnode binary (default: next to this coordd binary)")
	fs.BoolVar(&c.Secure, "secure", false, "TLS everywhere, mutual TLS on raft, and tokens: a throwaway CA, certificates and an admin token under DATA_DIR/pki (kept and reused on later runs)")
	fs.BoolVar(&c.Restart, "restart", false, "restart a member or streaming node that dies (after --restart-delay); without it a dead process is reported and the rest keep running")
	fs.DurationVar(&c.RestartDelay, "restart-delay", time.Second, "how long --restart waits before starting a dead process again")
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, badConfig("unexpected argument %q", fs.Arg(0))
	}
	if c.RestartDelay < 0 {
		return c, badConfig("--restart-delay must not be negative, got %v", c.RestartDelay)
	}
	if c.Nodes != 1 && c.Nodes != 3 && c.Nodes != 5 {
		return c, badConfig("--nodes must be 1, 3 or 5, got %d", c.Nodes)
	}
	if c.StreamingNodes < 0 || c.StreamingNodes > 16 {
		return c, badConfig("--streaming-nodes must be in 0..16, got %d", c.StreamingNodes)
	}
	if c.BasePort < 1024 || c.BasePort+1000+c.Nodes-1 > 65535 {
		return c, badConfig("--base-port %d leaves no room for %d members below 65536", c.BasePort, c.Nodes)
	}
	if c.StreamingNodes > 0 && c.BasePort+1200+c.StreamingNodes-1 > 65535 {
		return c, badConfig("--base-port %d leaves no room for the metrics of %d streaming nodes below 65536 (base+1200+i)", c.BasePort, c.StreamingNodes)
	}
	return c, nil
}

// dev runs a local cluster of coordd processes (this binary) in the
// foreground until ctx ends (Ctrl-C), then stops them all.
func dev(ctx context.Context, c devConfig, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	snBinary := c.StreamingBinary
	if snBinary == "" {
		snBinary = filepath.Join(filepath.Dir(exe), "streamingnode")
	}
	if c.StreamingNodes > 0 {
		if _, err := os.Stat(snBinary); err != nil {
			return badConfig("streaming node binary: %v (build it with 'make build', or pass --streaming-nodes 0)", err)
		}
	}
	var sec *cluster.LaunchSecurity
	if c.Secure {
		if sec, err = devSecurity(filepath.Join(c.DataDir, "pki"), time.Now()); err != nil {
			return err
		}
	}
	l := cluster.NewLauncher(cluster.LauncherConfig{
		Binary: exe, DataDir: c.DataDir, Nodes: c.Nodes, BasePort: c.BasePort, Host: "127.0.0.1", LogOut: stderr,
		StreamingNodes: c.StreamingNodes, StreamingBinary: snBinary, StreamingMetrics: true, Security: sec,
	})
	if err := l.Start(ctx); err != nil {
		return err
	}
	defer l.Stop()
	printBanner(stdout, l, sec, c)
	return supervise(ctx, l, c, stdout, time.Now)
}

// printBanner says what runs where: addresses, data dirs, logs and PIDs
// (for failure drills: kill -9 PID, kill -STOP PID), then a "try:" line.
func printBanner(stdout io.Writer, l *cluster.Launcher, sec *cluster.LaunchSecurity, c devConfig) {
	fmt.Fprintln(stdout, "coordd dev cluster is up (Ctrl-C stops it):")
	scheme := "http"
	if sec != nil {
		scheme = "https"
	}
	for _, m := range l.Members() {
		fmt.Fprintf(stdout, "  %-4s grpc %-16s http %s://%-16s raft %-16s pid %-7d log %s\n", m.ID, m.GRPCAddr, scheme, m.HTTPAddr, m.RaftAddr, l.Pid(m.ID), l.LogPath(m.ID))
	}
	for _, sn := range l.StreamingNodes() {
		fmt.Fprintf(stdout, "  %-4s streaming node %-16s metrics http://%s/metrics pid %-7d log %s\n", sn.Name, sn.Addr, sn.MetricsAddr, l.Pid(sn.Name), l.LogPath(sn.Name))
	}
	if len(l.StreamingNodes()) > 0 {
		objects := filepath.Join(filepath.Dir(l.WALDir()), "objects")
		if abs, err := filepath.Abs(objects); err == nil {
			objects = abs
		}
		fmt.Fprintf(stdout, "  WALs: %s; binlogs: file://%s (coordctl binlog dump --object-store %s)\n", l.WALDir(), objects, objects)
	}
	if c.Restart {
		fmt.Fprintf(stdout, "  a process that dies is restarted after %v (--restart)\n", c.RestartDelay)
	} else {
		fmt.Fprintln(stdout, "  a process that dies is reported and the rest keep running (--restart restarts it)")
	}
	if sec != nil {
		pki := filepath.Dir(sec.Server.CA)
		fmt.Fprintf(stdout, "  secure: TLS on every port, mutual TLS on raft; CA, certificates and the admin token in %s\n", pki)
		// The proxy certificate is what inserts present to the streaming
		// nodes (they take no tokens); coordd authenticates the token.
		proxy := security.DevPKIIn(pki).Proxy
		fmt.Fprintf(stdout, "try: bin/coordctl --endpoints %s --tls-ca %s --tls-cert %s --tls-key %s --token-file %s cluster status\n",
			l.Endpoints(), sec.Server.CA, proxy.Cert, proxy.Key, sec.BootstrapTokenFile)
		fmt.Fprintf(stdout, "     (then 'token create read --name me' and revoke the bootstrap token: docs/security.md)\n")
		fmt.Fprintf(stdout, "  streaming node sn<N> authenticates with %s (node identity N); proxies (and inserts): %s\n",
			filepath.Join(pki, "node-<N>.crt"), filepath.Join(pki, "proxy.crt"))
	} else if c.BasePort == 7001 && c.Nodes == 3 {
		fmt.Fprintln(stdout, "try: bin/coordctl cluster status   (coordctl's default endpoints are this cluster's)")
	} else {
		fmt.Fprintf(stdout, "try: bin/coordctl --endpoints %s cluster status\n", l.Endpoints())
	}
}

// supervise runs until ctx ends (Ctrl-C): a process that exits on its own
// is reported with its exit status and, with --restart, started again after
// the delay; the others keep running, so failure drills (kill the leader,
// kill or pause a streaming node) can be watched.
func supervise(ctx context.Context, l *cluster.Launcher, c devConfig, stdout io.Writer, now func() time.Time) error {
	restart := make(chan string, 64)
	stamp := func() string { return now().Format("15:04:05.000") }
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout, "stopping")
			return nil
		case err := <-l.Exited():
			var e *cluster.ExitError
			if !errors.As(err, &e) {
				fmt.Fprintf(stdout, "%s %v\n", stamp(), err)
				continue
			}
			if !c.Restart {
				fmt.Fprintf(stdout, "%s %v; the others keep running (restart it with --restart, or Ctrl-C and run again)\n", stamp(), e)
				continue
			}
			fmt.Fprintf(stdout, "%s %v; restarting it in %v\n", stamp(), e, c.RestartDelay)
			name := e.Name
			time.AfterFunc(c.RestartDelay, func() {
				select {
				case restart <- name:
				case <-ctx.Done():
				}
			})
		case name := <-restart:
			if ctx.Err() != nil {
				continue
			}
			if err := l.Restart(name); err != nil {
				fmt.Fprintf(stdout, "%s restart %s failed: %v\n", stamp(), name, err)
				continue
			}
			fmt.Fprintf(stdout, "%s restarted %s (pid %d, log %s)\n", stamp(), name, l.Pid(name), l.LogPath(name))
		}
	}
}

// devSecurity returns the PKI and admin token of a secure dev cluster in
// dir, creating them on the first run. Later runs reuse them: the cluster
// in the data dir installed that admin token once and would refuse a new
// one (docs/security.md#bootstrap-token).
func devSecurity(dir string, now time.Time) (*cluster.LaunchSecurity, error) {
	files := security.DevPKIIn(dir)
	tokenPath := filepath.Join(dir, "admin.token")
	if _, err := os.Stat(files.Server.CA); os.IsNotExist(err) {
		if files, err = security.WriteDevPKI(dir, now, 90*24*time.Hour); err != nil {
			return nil, fmt.Errorf("dev PKI: %w", err)
		}
		tok, err := generateToken()
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(tokenPath, []byte(tok+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("write admin token: %w", err)
		}
	}
	for _, p := range []string{files.Server.Cert, files.Node(security.DevNodes).Cert, tokenPath} {
		if _, err := os.Stat(p); err != nil {
			return nil, badConfig("dev PKI in %s is incomplete (%v): remove the directory to start over", dir, err)
		}
	}
	return &cluster.LaunchSecurity{Server: files.Server, Nodes: files.Nodes, BootstrapTokenFile: tokenPath}, nil
}
