package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/coordd/coordd/cluster"
)

type devConfig struct {
	DataDir         string
	Nodes           int
	BasePort        int
	StreamingNodes  int
	StreamingBinary string
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
	if err := fs.Parse(args); err != nil {
		return c, errUsage
	}
	if fs.NArg() > 0 {
		return c, badConfig("unexpected argument %q", fs.Arg(0))
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
	l := cluster.NewLauncher(cluster.LauncherConfig{
		Binary: exe, DataDir: c.DataDir, Nodes: c.Nodes, BasePort: c.BasePort, Host: "127.0.0.1", LogOut: stderr,
		StreamingNodes: c.StreamingNodes, StreamingBinary: snBinary, StreamingMetrics: true,
	})
	if err := l.Start(ctx); err != nil {
		return err
	}
	defer l.Stop()
	fmt.Fprintln(stdout, "coordd dev cluster is up (Ctrl-C stops it):")
	for _, m := range l.Members() {
		fmt.Fprintf(stdout, "  %-4s grpc %-16s http http://%-16s raft %-16s data %s\n", m.ID, m.GRPCAddr, m.HTTPAddr, m.RaftAddr, m.DataDir)
	}
	for _, sn := range l.StreamingNodes() {
		fmt.Fprintf(stdout, "  %-4s streaming node %-16s metrics http://%s/metrics data %s (WALs in %s)\n", sn.Name, sn.Addr, sn.MetricsAddr, sn.DataDir, l.WALDir())
	}
	if len(l.StreamingNodes()) > 0 {
		objects := filepath.Join(filepath.Dir(l.WALDir()), "objects")
		fmt.Fprintf(stdout, "  binlogs: file://%s (the streaming nodes' default object store; coordctl binlog dump --object-store %s)\n", objects, objects)
	}
	fmt.Fprintf(stdout, "try: bin/coordctl --endpoints %s cluster status\n", l.Endpoints())
	select {
	case <-ctx.Done():
	case err := <-l.Exited():
		return fmt.Errorf("a member exited: %w", err)
	}
	fmt.Fprintln(stdout, "stopping")
	return nil
}
