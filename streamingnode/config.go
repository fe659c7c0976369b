package streamingnode

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Config configures a streaming node.
type Config struct {
	// Coord lists coordd gRPC endpoints (host:port). Any member will do:
	// followers forward to the leader.
	Coord []string
	// CoordTLS, when set, is the TLS of the connections to coordd
	// (client.LoadTLS builds it); CoordToken, when set, is sent as the
	// bearer token (it needs CoordTLS). A secure cluster needs the node
	// role: a token of that role, or a client certificate carrying it.
	CoordTLS   *tls.Config
	CoordToken string
	// ServeTLS, when set, is the TLS of the node's own port
	// (security.Material.StreamingNodeServer builds it): the node serves
	// TLS with its certificate, and admits lifecycle calls (Assign,
	// Remove) and coordinator appends only from a caller presenting
	// coordd's server identity (docs/security.md#the-streaming-nodes-port).
	// nil serves plaintext and admits anyone (an insecure cluster).
	ServeTLS *tls.Config
	// Addr is the listen address of the StreamingNodeService and the address
	// registered with coordd. With port 0 (tests) the bound address is
	// registered instead.
	Addr string
	// WALDir is the WAL directory shared by every streaming node process.
	WALDir string
	// DataDir (optional) is where the node records its last identity, for
	// logs only.
	DataDir string
	// ResourceGroup is sent with the registration ("" = coordd's default).
	ResourceGroup string
	// HeartbeatInterval defaults to 1s.
	HeartbeatInterval time.Duration
	// DrainTimeout bounds the wait for coordd to move the node's channels
	// away during a controlled shutdown (default 30s).
	DrainTimeout time.Duration
	// RPCTimeout bounds each call to coordd (default 3s).
	RPCTimeout time.Duration
	// ConfirmTimeout bounds how long a lifecycle or coordinator append
	// request waits for coordd to confirm a coordinator or PChannel term
	// the node has not seen yet (default 3s); past it the request is refused.
	ConfirmTimeout time.Duration
	// TimestampBatch is how many timestamps to take from coordd's TSO at a
	// time (default 256).
	TimestampBatch uint32
	// UnsafeNoFence breaks the node on purpose, for tests of the tests
	// only: its appends ignore the WAL fence and it ignores Remove (as if
	// the Remove never reached it), so a deposed owner keeps writing at its
	// old term.
	UnsafeNoFence bool
	// UnsafeAcceptAnyRemove breaks the node on purpose, for tests only: a
	// Remove is accepted without checking that coordd moved the channel on
	// (the node's behaviour before that check), so a test can take a WAL
	// away behind coordd's back and watch coordd notice the lost WAL.
	UnsafeAcceptAnyRemove bool
	// Logger defaults to a logger on stderr at info level.
	Logger hclog.Logger
	// Listener, if set, is used instead of listening on Addr (Addr may then
	// be empty; the listener's address is registered).
	Listener net.Listener
	// ObjectStore is the URL of the object store the flusher writes
	// binlogs to (package objectstore); default: a directory named objects
	// beside WALDir, shared like the WALs.
	ObjectStore string
	// DisableFlusher turns the flusher off (the write path still works).
	DisableFlusher bool
	// FlusherTickInterval: how often the flusher reports time ticks and
	// checkpoints (default 200ms).
	FlusherTickInterval time.Duration
	// FlusherSaveInterval: the flusher saves a growing segment's buffered
	// rows (binlog + SaveBinlogPaths without flushing) once the oldest has
	// waited this long; 0: never by age.
	FlusherSaveInterval time.Duration
	// FlusherSaveBytes: the same once a segment has this many bytes
	// buffered (16 per row); 0: never by size.
	FlusherSaveBytes int64
	// MetricsAddr (optional) is where Prometheus metrics are served
	// (HTTP, path /metrics); port 0 picks one (Node.MetricsAddr).
	MetricsAddr string
}

func (c *Config) setDefaults() {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = 3 * time.Second
	}
	if c.ConfirmTimeout <= 0 {
		c.ConfirmTimeout = 3 * time.Second
	}
	if c.TimestampBatch == 0 {
		c.TimestampBatch = 256
	}
	if c.Logger == nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Name: "streamingnode", Level: hclog.Info})
	}
}

func (c *Config) validate() error {
	if c.CoordToken != "" && c.CoordTLS == nil {
		return errors.New("streamingnode: a coordd token needs TLS (CoordTLS)")
	}
	if (c.ServeTLS == nil) != (c.CoordTLS == nil) {
		return errors.New("streamingnode: a secure node talks TLS both ways: set both CoordTLS and ServeTLS, or neither")
	}
	if len(c.Coord) == 0 {
		return errors.New("streamingnode: at least one coordd endpoint is required")
	}
	for _, a := range c.Coord {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("streamingnode: coordd endpoint %q: %v", a, err)
		}
	}
	if c.Listener == nil {
		host, _, err := net.SplitHostPort(c.Addr)
		if err != nil {
			return fmt.Errorf("streamingnode: address %q: %v", c.Addr, err)
		}
		if host == "" {
			return fmt.Errorf("streamingnode: address %q: the host is registered with coordd and must not be empty", c.Addr)
		}
	}
	if c.WALDir == "" {
		return errors.New("streamingnode: the WAL directory is required")
	}
	if c.FlusherSaveInterval < 0 {
		return fmt.Errorf("streamingnode: flusher save interval must not be negative, got %v", c.FlusherSaveInterval)
	}
	if c.FlusherSaveBytes < 0 {
		return fmt.Errorf("streamingnode: flusher save size must not be negative, got %d", c.FlusherSaveBytes)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return fmt.Errorf("streamingnode: metrics address %q: %v", c.MetricsAddr, err)
		}
	}
	return nil
}
