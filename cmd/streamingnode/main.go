// Command streamingnode is coordd's reference streaming node: it registers
// with coordd, hosts the PChannel WALs coordd assigns to it (term-fenced
// logs in a directory shared by every streaming node) and serves
// StreamingNodeService.
//
//	streamingnode --coord HOST:PORT[,HOST:PORT...] --addr HOST:PORT --wal-dir DIR [flags]
//	streamingnode --version
//
// Every flag has an environment equivalent: STREAMINGNODE_ plus the flag
// name in upper snake case (STREAMINGNODE_COORD, STREAMINGNODE_ADDR,
// STREAMINGNODE_WAL_DIR, STREAMINGNODE_DATA_DIR, ...). A flag on the command
// line wins over the environment.
//
// SIGINT or SIGTERM starts a controlled shutdown (drain, deregister, close);
// a second signal exits at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cmd/internal/buildinfo"
	"github.com/coordd/coordd/security"
	"github.com/coordd/coordd/streamingnode"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "streamingnode: %v: shutting down (signal again to exit at once)\n", s)
		cancel()
		s = <-sigs
		fmt.Fprintf(os.Stderr, "streamingnode: %v: exiting now\n", s)
		os.Exit(1)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Fprint(stdout, buildinfo.Text("streamingnode"))
		return 0
	}
	cfg, logLevel, err := parseFlags(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage())
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "streamingnode: %v (see streamingnode -h)\n", err)
		return 2
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "streamingnode", Level: hclog.LevelFromString(logLevel), Output: stderr})
	if cfg.UnsafeNoFence {
		cfg.Logger.Warn("TEST ONLY: the WAL fence is deliberately broken (--test-only-unsafe-no-fence)")
	}
	if cfg.UnsafeAcceptAnyRemove {
		cfg.Logger.Warn("TEST ONLY: Removes coordd did not decide are accepted (--test-only-unsafe-accept-any-remove)")
	}
	if err := streamingnode.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "streamingnode: %v\n", err)
		return 1
	}
	return 0
}

// secFlags name the files of a secure coordd cluster (docs/security.md).
type secFlags struct{ ca, cert, key, tokenFile, listenCert, listenKey string }

func newFlagSet(cfg *streamingnode.Config, coord, logLevel *string, sec *secFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("streamingnode", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(coord, "coord", "", "coordd gRPC endpoints, HOST:PORT[,HOST:PORT...] (required)")
	fs.StringVar(&cfg.Addr, "addr", "", "listen address HOST:PORT, also the address registered with coordd (required; port 0 picks one)")
	fs.StringVar(&cfg.WALDir, "wal-dir", "", "WAL directory shared by every streaming node (required)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for this node's own files (optional)")
	fs.StringVar(&cfg.ObjectStore, "object-store", "", "object store for binlogs: file:///DIR or s3://BUCKET?endpoint=...&use_path_style=true (default: a directory named objects beside --wal-dir)")
	fs.StringVar(&cfg.ResourceGroup, "resource-group", "", "resource group to register in (default: coordd's default)")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", time.Second, "how often to heartbeat to coordd; keep it well under coordd's --node-ttl (default 10s): a node silent that long is marked DOWN and its PChannels move")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "how long a controlled shutdown waits for coordd to move channels away; then it stops anyway, and what it still held moves once coordd's --node-ttl passes")
	fs.DurationVar(&cfg.FlusherSaveInterval, "flusher-save-interval", 10*time.Second,
		"save a growing segment's buffered rows (binlog + SaveBinlogPaths, not flushed) once the oldest waited this long, so the checkpoint advances and recovery replays less; 0 = never by age")
	fs.Int64Var(&cfg.FlusherSaveBytes, "flusher-save-bytes", 16<<20,
		"save a growing segment's buffered rows once they reach this many bytes (16 per row); 0 = never by size")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on HOST:PORT at /metrics (default: off)")
	fs.StringVar(logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.StringVar(&sec.ca, "tls-ca", "", "CA certificate file: talk to coordd over TLS, verifying it against this CA, and serve the node's own port with TLS (needs a node certificate: --tls-cert or --listen-tls-cert)")
	fs.StringVar(&sec.cert, "tls-cert", "", "the node's certificate from the cluster's CA (naming this node's identity, spiffe://coordd/node/N): mutual TLS to coordd (no token needed) and, unless --listen-tls-cert is given, the certificate of the node's own port")
	fs.StringVar(&sec.key, "tls-key", "", "key of --tls-cert")
	fs.StringVar(&sec.listenCert, "listen-tls-cert", "", "a node certificate for the node's own TLS port only, not presented to coordd (default: --tls-cert; for a node that authenticates to coordd with --token-file alone)")
	fs.StringVar(&sec.listenKey, "listen-tls-key", "", "key of --listen-tls-cert")
	fs.StringVar(&sec.tokenFile, "token-file", "", "file holding this node's coordd token (coordctl token create node --node-id N; needs --tls-ca)")
	fs.BoolVar(&cfg.UnsafeNoFence, "test-only-unsafe-no-fence", false,
		"TEST ONLY, breaks the node: appends ignore the WAL fence and Remove is ignored, so a deposed owner keeps writing (tests of the Jepsen-style checkers)")
	fs.BoolVar(&cfg.UnsafeAcceptAnyRemove, "test-only-unsafe-accept-any-remove", false,
		"TEST ONLY, breaks the node: a Remove is accepted without checking that coordd moved the channel on, so a test can take a WAL away behind coordd's back (lost-WAL detection tests)")
	return fs
}

func usage() string {
	var b strings.Builder
	b.WriteString("streamingnode — coordd's reference streaming node\n\n")
	b.WriteString("usage: streamingnode --coord HOST:PORT[,...] --addr HOST:PORT --wal-dir DIR [flags]\n       streamingnode --version   build: version, commit, build time, log format\n\nflags (environment: STREAMINGNODE_<FLAG>, e.g. STREAMINGNODE_WAL_DIR):\n")
	var cfg streamingnode.Config
	var coord, level string
	newFlagSet(&cfg, &coord, &level, &secFlags{}).VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(&b, "  --%s\n        %s", f.Name, f.Usage)
		if f.DefValue != "" {
			fmt.Fprintf(&b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	})
	return b.String()
}

func envName(flagName string) string {
	return "STREAMINGNODE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags reads flags, then the environment for flags not given. Errors
// are one line.
func parseFlags(args []string, getenv func(string) string) (streamingnode.Config, string, error) {
	var cfg streamingnode.Config
	var coord, logLevel string
	var sec secFlags
	fs := newFlagSet(&cfg, &coord, &logLevel, &sec)
	if err := fs.Parse(args); err != nil {
		return cfg, "", err
	}
	if fs.NArg() > 0 {
		return cfg, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || envErr != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %v", envName(f.Name), v, err)
			}
		}
	})
	if envErr != nil {
		return cfg, "", envErr
	}
	if coord == "" {
		return cfg, "", errors.New("--coord is required")
	}
	for _, a := range strings.Split(coord, ",") {
		a = strings.TrimSpace(a)
		if err := checkAddr("--coord", a, false); err != nil {
			return cfg, "", err
		}
		cfg.Coord = append(cfg.Coord, a)
	}
	if cfg.Addr == "" {
		return cfg, "", errors.New("--addr is required")
	}
	if err := checkAddr("--addr", cfg.Addr, true); err != nil {
		return cfg, "", err
	}
	if cfg.WALDir == "" {
		return cfg, "", errors.New("--wal-dir is required")
	}
	if cfg.HeartbeatInterval < 10*time.Millisecond {
		return cfg, "", fmt.Errorf("--heartbeat-interval must be at least 10ms, got %v", cfg.HeartbeatInterval)
	}
	if cfg.DrainTimeout <= 0 {
		return cfg, "", fmt.Errorf("--drain-timeout must be positive, got %v", cfg.DrainTimeout)
	}
	if cfg.FlusherSaveInterval != 0 && cfg.FlusherSaveInterval < 10*time.Millisecond {
		return cfg, "", fmt.Errorf("--flusher-save-interval must be 0 (off) or at least 10ms, got %v", cfg.FlusherSaveInterval)
	}
	if cfg.FlusherSaveBytes != 0 && cfg.FlusherSaveBytes < 16 {
		return cfg, "", fmt.Errorf("--flusher-save-bytes must be 0 (off) or at least 16 (one row), got %d", cfg.FlusherSaveBytes)
	}
	if cfg.MetricsAddr != "" {
		if err := checkAddr("--metrics-addr", cfg.MetricsAddr, true); err != nil {
			return cfg, "", err
		}
	}
	if hclog.LevelFromString(logLevel) == hclog.NoLevel {
		return cfg, "", fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", logLevel)
	}
	if err := sec.load(&cfg); err != nil {
		return cfg, "", err
	}
	return cfg, logLevel, nil
}

// load reads the TLS files and token into cfg.
func (s secFlags) load(cfg *streamingnode.Config) error {
	if s.ca == "" {
		if s.cert != "" || s.key != "" || s.tokenFile != "" || s.listenCert != "" || s.listenKey != "" {
			return errors.New("--tls-cert, --tls-key, --listen-tls-cert, --listen-tls-key and --token-file need --tls-ca")
		}
		return nil
	}
	tc, err := client.LoadTLS(client.TLSFiles{CA: s.ca, Cert: s.cert, Key: s.key})
	if err != nil {
		return err
	}
	cfg.CoordTLS = tc
	// The node's own port is TLS too, with the same certificate unless
	// --listen-tls-cert names another (docs/security.md#the-streaming-nodes-port).
	listen := security.Files{CA: s.ca, Cert: s.cert, Key: s.key}
	if s.listenCert != "" || s.listenKey != "" {
		listen.Cert, listen.Key = s.listenCert, s.listenKey
	}
	m, err := security.Load(listen)
	if err != nil {
		return fmt.Errorf("the node's TLS port: %w", err)
	}
	if cfg.ServeTLS, err = m.StreamingNodeServer(); err != nil {
		return err
	}
	if s.tokenFile != "" {
		if cfg.CoordToken, err = client.ReadTokenFile(s.tokenFile); err != nil {
			return err
		}
	}
	return nil
}

// checkAddr checks HOST:PORT. The listen address is also what other
// processes dial, so its host must be a real one and its port may be 0.
func checkAddr(flagName, addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want HOST:PORT", flagName, addr)
	}
	if host == "" {
		return fmt.Errorf("%s %q: host is empty", flagName, addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || (p == 0 && !listen) {
		return fmt.Errorf("%s %q: bad port", flagName, addr)
	}
	if ip := net.ParseIP(host); listen && ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%s %q: the address is registered with coordd, so it must name this host (not %s)", flagName, addr, host)
	}
	return nil
}
