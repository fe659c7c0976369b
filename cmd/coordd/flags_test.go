package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/raftnode"
)

// env is a fake environment for parseServeFlags.
type env map[string]string

// get looks k up; COORDD_INSECURE defaults to "true" so the many cases
// about other flags need not repeat the security choice
// (securityflags_test.go covers it, with the default off).
func (e env) get(k string) string {
	if v, ok := e[k]; ok || k != "COORDD_INSECURE" {
		return v
	}
	return "true"
}

// writeFile writes a config file into a fresh temporary directory.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "coordd.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	raftAddr = "127.0.0.1:7101"
	grpcAddr = "127.0.0.1:7001"
	httpAddr = "127.0.0.1:8001"
	peers3   = "n1=127.0.0.1:7101,n2=127.0.0.1:7102,n3=127.0.0.1:7103"
)

// baseArgs is a complete, valid command line without --peers or --join.
func baseArgs() []string {
	return []string{"--id", "n1", "--data-dir", "/var/lib/coordd", "--raft-addr", raftAddr, "--grpc-addr", grpcAddr, "--http-addr", httpAddr}
}

// with returns baseArgs plus extra; a flag in extra that is also in
// baseArgs replaces it.
func with(extra ...string) []string {
	args := without()
	for i := 0; i+1 < len(extra); i += 2 {
		args = set(args, extra[i], extra[i+1])
	}
	if len(extra)%2 == 1 {
		args = append(args, extra[len(extra)-1])
	}
	return args
}

func set(args []string, flag, value string) []string {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == flag {
			out := append([]string(nil), args...)
			out[i+1] = value
			return out
		}
	}
	return append(args, flag, value)
}

// without returns baseArgs minus the named flags.
func without(flags ...string) []string {
	base := baseArgs()
	var out []string
	for i := 0; i < len(base); i += 2 {
		skip := false
		for _, f := range flags {
			skip = skip || base[i] == f
		}
		if !skip {
			out = append(out, base[i], base[i+1])
		}
	}
	return out
}

func TestParseServeFlagsErrors(t *testing.T) {
	notJSON := writeFile(t, "id = n1\n")
	array := writeFile(t, `["n1"]`)
	unknownKey := writeFile(t, `{"id":"n1","bogus":1}`)
	configKey := writeFile(t, `{"config":"/etc/other.json"}`)
	badValue := writeFile(t, `{"commit-timeout":"fast"}`)
	trailing := writeFile(t, `{"id":"n1"} {"id":"n2"}`)
	badLease := writeFile(t, `{"leader-lease-timeout":"1s"}`)
	missing := filepath.Join(t.TempDir(), "absent.json")

	tests := []struct {
		name  string
		args  []string
		env   env
		usage bool   // want errUsage rather than a configError
		want  string // substring of the error message
	}{
		{name: "missing --id", args: without("--id"), want: "--id: member id must be 1..64 bytes, got 0"},
		{name: "missing --data-dir", args: without("--data-dir"), want: "--data-dir is required"},
		{name: "missing --raft-addr", args: without("--raft-addr"), want: "--raft-addr is required"},
		{name: "missing --grpc-addr", args: without("--grpc-addr"), want: "--grpc-addr is required"},
		{name: "missing --http-addr", args: without("--http-addr"), want: "--http-addr is required"},
		{name: "no flags at all", args: nil, want: "--id"},
		{name: "id with space", args: with("--id", "a b"), want: `--id: member id "a b": character ' ' not allowed`},
		{name: "id with slash", args: with("--id", "n/1"), want: `character '/' not allowed`},
		{name: "id too long", args: with("--id", strings.Repeat("n", 65)), want: "--id: member id must be 1..64 bytes, got 65"},
		{name: "raft addr without port", args: with("--raft-addr", "nohost"), want: `--raft-addr "nohost"`},
		{name: "grpc port 0", args: with("--grpc-addr", "127.0.0.1:0"), want: `--grpc-addr "127.0.0.1:0": port must be 1..65535`},
		{name: "http port 99999", args: with("--http-addr", "127.0.0.1:99999"), want: `--http-addr "127.0.0.1:99999": port must be 1..65535`},
		{name: "http port not a number", args: with("--http-addr", "127.0.0.1:http"), want: `--http-addr "127.0.0.1:http": port must be 1..65535`},
		{name: "empty host", args: with("--raft-addr", ":7101"), want: `--raft-addr ":7101": host is empty`},
		{name: "grpc = http", args: with("--http-addr", grpcAddr), want: "--raft-addr, --grpc-addr and --http-addr must differ"},
		{name: "raft = grpc", args: with("--grpc-addr", raftAddr), want: "must differ"},
		{name: "peers malformed", args: with("--peers", "n1"), want: `--peers: peer "n1": want id=host:port`},
		{name: "peers bad address", args: with("--peers", "n1=127.0.0.1:0"), want: `--peers: peer "n1=127.0.0.1:0"`},
		{name: "peers bad id", args: with("--peers", "n 1="+raftAddr), want: `--peers: peer "n 1=127.0.0.1:7101"`},
		{name: "peers duplicate id", args: with("--peers", "n1="+raftAddr+",n1=127.0.0.1:7102"), want: "duplicate id or address"},
		{name: "peers duplicate address", args: with("--peers", "n1="+raftAddr+",n2="+raftAddr), want: "duplicate id or address"},
		{name: "peers empty entry", args: with("--peers", "n1="+raftAddr+","), want: `--peers: peer "": want id=host:port`},
		{name: "peers without self", args: with("--peers", "n2=127.0.0.1:7102,n3=127.0.0.1:7103"), want: `--peers does not list this member's --id "n1"`},
		{name: "peers list self elsewhere", args: with("--peers", "n1=127.0.0.1:9999,n2=127.0.0.1:7102"), want: "--peers lists n1 at 127.0.0.1:9999, but --raft-addr is 127.0.0.1:7101"},
		{name: "join bad address", args: with("--join", "nohost"), want: `--join "nohost"`},
		{name: "peers and join", args: with("--peers", "n1="+raftAddr, "--join", "127.0.0.1:7002"), want: "give --peers to bootstrap a new cluster or --join to join a running one, not both"},
		{name: "lease > heartbeat", args: with("--leader-lease-timeout", "500ms"), want: "--leader-lease-timeout (500ms) must not exceed --heartbeat-timeout (400ms)"},
		{name: "election < heartbeat", args: with("--election-timeout", "100ms"), want: "--election-timeout (100ms) must be at least --heartbeat-timeout (400ms)"},
		{name: "heartbeat < 5ms", args: with("--heartbeat-timeout", "4ms", "--election-timeout", "4ms", "--leader-lease-timeout", "4ms"), want: "--heartbeat-timeout must be at least 5ms, got 4ms"},
		{name: "commit timeout < 5ms", args: with("--commit-timeout", "1ms"), want: "--commit-timeout must be at least 5ms, got 1ms"},
		{name: "commit timeout 0", args: with("--commit-timeout", "0s"), want: "--commit-timeout must be at least 5ms, got 0s"},
		{name: "snapshot interval < 5ms", args: with("--snapshot-interval", "1us"), want: "--snapshot-interval must be at least 5ms"},
		{name: "lease < 5ms", args: with("--leader-lease-timeout", "1ms"), want: "--leader-lease-timeout must be at least 5ms"},
		{name: "negative heartbeat", args: with("--heartbeat-timeout", "-1s", "--leader-lease-timeout", "-1s"), want: "--heartbeat-timeout must be at least 5ms"},
		{name: "snapshot threshold 0", args: with("--snapshot-threshold", "0"), want: "--snapshot-threshold and --trailing-logs must be positive"},
		{name: "trailing logs 0", args: with("--trailing-logs", "0"), want: "must be positive"},
		{name: "unknown log store", args: with("--raft-log-store", "leveldb"), want: `--raft-log-store must be bolt or wal, got "leveldb"`},
		{name: "wal segment too small", args: with("--raft-wal-segment-size", "4095"), want: "--raft-wal-segment-size must be 0 (raft-wal's default) or in 4096..1073741824 bytes, got 4095"},
		{name: "wal segment too large", args: with("--raft-wal-segment-size", "2147483648"), want: "--raft-wal-segment-size must be 0"},
		{name: "wal segment negative", args: with("--raft-wal-segment-size", "-1"), want: "--raft-wal-segment-size must be 0"},
		{name: "no entries in flight", args: with("--raft-inflight-entries", "0"), want: "--raft-inflight-entries must be in 1..64, got 0"},
		{name: "too many entries in flight", args: with("--raft-inflight-entries", "65"), want: "--raft-inflight-entries must be in 1..64, got 65"},
		{name: "ready max lag 0", args: with("--ready-max-lag", "0"), want: "--ready-max-lag must be positive"},
		{name: "ready max lag negative", args: with("--ready-max-lag", "-1"), usage: true, want: "usage"},
		{name: "bad log level", args: with("--log-level", "loud"), want: `--log-level "loud": want trace, debug, info, warn or error`},
		{name: "bad log format", args: with("--log-format", "xml"), want: `--log-format "xml": want text or json`},
		{name: "bad cluster id", args: with("--cluster-id", "a b"), want: `--cluster-id: cluster id "a b"`},
		{name: "zero pchannels", args: with("--pchannels", "0"), want: "--pchannels must be in 1..65536, got 0"},
		{name: "too many pchannels", args: with("--pchannels", "70000"), want: "--pchannels must be in 1..65536"},
		{name: "bad pchannel prefix", args: with("--pchannel-prefix", "dml_"), want: "--pchannel-prefix: pchannel prefix \"dml_\" must not end with"},
		{name: "node ttl too short", args: with("--node-ttl", "10ms"), want: "--node-ttl must be at least 100ms"},
		{name: "balance interval too short", args: with("--balance-interval", "10ms"), want: "--balance-interval must be at least 1s"},
		{name: "negative min rebalance interval", args: with("--min-rebalance-interval", "-1s"), want: "--min-rebalance-interval must not be negative"},
		{name: "zero tombstone count", args: with("--broadcast-tombstone-max-count", "0"), want: "--broadcast-tombstone-max-count must be in 1.."},
		{name: "tombstone lifetime too short", args: with("--broadcast-tombstone-max-lifetime", "10ms"), want: "--broadcast-tombstone-max-lifetime must be at least 1s"},
		{name: "tombstone check too often", args: with("--broadcast-tombstone-check-interval", "1ms"), want: "--broadcast-tombstone-check-interval must be at least 100ms"},
		{name: "zero segment size", args: with("--segment-max-size-mb", "0"), want: "--segment-max-size-mb must be at least 1"},
		{name: "seal proportion over 1", args: with("--segment-seal-proportion", "1.5"), want: "--segment-seal-proportion must be in (0, 1]"},
		{name: "jitter of 1", args: with("--segment-seal-proportion-jitter", "1"), want: "--segment-seal-proportion-jitter must be in [0, 1)"},
		{name: "segment life too short", args: with("--segment-max-life", "1ms"), want: "--segment-max-life and --segment-max-idle must be at least 1s"},
		{name: "no binlog files", args: with("--segment-max-binlog-files", "0"), want: "--segment-max-binlog-files must be positive"},
		{name: "dropped retention too short", args: with("--segment-dropped-retention", "1ms"), want: "--segment-dropped-retention must be at least 1s"},
		{name: "expiration too short", args: with("--segment-assignment-expiration", "1ms"), want: "--segment-assignment-expiration and --segment-check-interval must be at least 10ms"},
		{name: "zero http connection cap", args: with("--http-max-conns", "0"), want: "--http-max-conns must be in 1.."},
		{name: "zero watcher cap", args: with("--max-watchers", "0"), want: "--max-watchers must be in 1.."},
		{name: "state budget not a size", args: with("--state-budget", "lots"), usage: true, want: "usage"},
		{name: "negative state budget", args: with("--state-budget", "-1GiB"), usage: true, want: "usage"},
		{name: "memory limit not a size", args: with("--memory-limit", "plenty"), usage: true, want: "usage"},
		{name: "memory limit too small", args: with("--memory-limit", "1MiB"), usage: true, want: "usage"},
		{name: "env memory limit too small", args: baseArgs(), env: env{"COORDD_MEMORY_LIMIT": "1000"}, want: `COORDD_MEMORY_LIMIT="1000": 1000 is below 64.0 MiB, too little for the Go runtime itself (0: leave the runtime's setting)`},
		{name: "env bad state budget", args: baseArgs(), env: env{"COORDD_STATE_BUDGET": "1.5GiB"}, want: `COORDD_STATE_BUDGET="1.5GiB": byte count "1.5GiB": want a whole number of bytes`},
		{name: "zero proposal queue", args: with("--max-pending-proposals", "0"), want: "--max-pending-proposals must be in 1..1048576, got 0"},
		{name: "negative proposal queue", args: with("--max-pending-proposals", "-5"), want: "--max-pending-proposals must be in 1..1048576, got -5"},
		{name: "proposal queue too large", args: with("--max-pending-proposals", "2000000"), want: "--max-pending-proposals must be in 1..1048576, got 2000000"},
		{name: "zero grpc streams", args: with("--grpc-max-streams", "0"), want: "--grpc-max-streams must be in 1.."},
		{name: "http read timeout too short", args: with("--http-read-timeout", "1ms"), want: "--http-read-timeout must be at least 100ms"},
		{name: "http header timeout too short", args: with("--http-read-header-timeout", "1ms"), want: "--http-read-header-timeout must be at least 100ms"},
		{name: "http header timeout over read timeout", args: with("--http-read-header-timeout", "40s"),
			want: "--http-read-header-timeout (40s) must not exceed --http-read-timeout (30s)"},
		{name: "negative unauthenticated connection cap", args: with("--http-max-unauthenticated-conns", "-1"),
			want: "--http-max-unauthenticated-conns must be in 0..1000"},
		{name: "unauthenticated connection cap over the total", args: with("--http-max-unauthenticated-conns", "1001"),
			want: "--http-max-unauthenticated-conns must be in 0..1000 (--http-max-conns; 0: half of it), got 1001"},
		{name: "grpc handshake timeout too short", args: with("--grpc-handshake-timeout", "0s"), want: "--grpc-handshake-timeout must be at least 100ms"},
		{name: "request wait too short", args: with("--max-request-wait", "0s"), want: "--max-request-wait must be at least 100ms"},
		{name: "unexpected argument", args: with("extra"), want: `unexpected argument "extra"`},

		{name: "unknown flag", args: with("--bogus", "1"), usage: true, want: "usage"},
		{name: "bad duration syntax", args: with("--commit-timeout", "fast"), usage: true, want: "usage"},
		{name: "bad number syntax", args: with("--snapshot-threshold", "-1"), usage: true, want: "usage"},

		{name: "config not JSON", args: with("--config", notJSON), want: "not a JSON object"},
		{name: "config is an array", args: with("--config", array), want: "not a JSON object"},
		{name: "config trailing data", args: with("--config", trailing), want: "not a JSON object"},
		{name: "config unknown key", args: with("--config", unknownKey), want: `unknown key "bogus"`},
		{name: "config names another config", args: with("--config", configKey), want: `unknown key "config"`},
		{name: "config bad value", args: with("--config", badValue), want: `--config key "commit-timeout"=fast`},
		{name: "config missing", args: with("--config", missing), want: "--config: open " + missing},
		{name: "config value fails validation", args: with("--config", badLease), want: "--leader-lease-timeout (1s) must not exceed"},
		{name: "COORDD_CONFIG not JSON", args: baseArgs(), env: env{"COORDD_CONFIG": notJSON}, want: "not a JSON object"},
		{name: "env bad duration", args: baseArgs(), env: env{"COORDD_COMMIT_TIMEOUT": "fast"}, want: `COORDD_COMMIT_TIMEOUT="fast"`},
		{name: "env bad id", args: without("--id"), env: env{"COORDD_ID": "a b"}, want: `--id: member id "a b"`},
		{name: "env bad peers", args: baseArgs(), env: env{"COORDD_PEERS": "n1"}, want: `--peers: peer "n1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := parseServeFlags(tc.args, tc.env.get, &stderr)
			if err == nil {
				t.Fatalf("parseServeFlags(%q) succeeded; want an error containing %q", tc.args, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			_, isConfig := err.(configError)
			switch {
			case tc.usage && !errors.Is(err, errUsage):
				t.Errorf("error %v (%T) is not errUsage", err, err)
			case tc.usage && stderr.Len() == 0:
				t.Errorf("errUsage but nothing printed to stderr")
			case !tc.usage && !isConfig:
				t.Errorf("error %v is a %T, not a configError (so run would not exit 2)", err, err)
			}
			if !tc.usage && strings.Contains(err.Error(), "invalid command") {
				t.Errorf("error %q leaks the log validator's wording", err)
			}
		})
	}
}

func TestParseServeFlagsValid(t *testing.T) {
	defaults := raftnode.Config{
		HeartbeatTimeout: 400 * time.Millisecond, ElectionTimeout: 400 * time.Millisecond,
		LeaderLeaseTimeout: 400 * time.Millisecond, CommitTimeout: 20 * time.Millisecond,
		SnapshotInterval: 30 * time.Second, SnapshotThreshold: 8192, TrailingLogs: 10240, MaxInflightEntries: raftnode.MaxInflightEntries,
		StateBudget: defaultStateBudget(),
	}
	base := serveConfig{ID: "n1", DataDir: "/var/lib/coordd", RaftAddr: raftAddr, GRPCAddr: grpcAddr, HTTPAddr: httpAddr, LogLevel: "info", LogFormat: "text", ReadyMaxLag: raftnode.DefaultReadyMaxLag, LeaseReads: true, Raft: defaults,
		Channels: channelFlags{ClusterID: "by-dev", PChannels: 16, PChannelPrefix: "by-dev-rootcoord-dml", NodeTTL: 10 * time.Second,
			BalanceInterval: time.Minute, AllowRebalance: true, MinRebalanceInterval: 5 * time.Minute},
		Broadcast: broadcastFlags{TombstoneMaxCount: 8192, TombstoneMaxLifetime: 24 * time.Hour, TombstoneCheckInterval: 5 * time.Minute},
		Segments: segmentFlags{MaxSizeMB: 1024, SealProportion: 0.12, SealProportionJitter: 0.1, MaxLife: 24 * time.Hour,
			MaxIdle: 10 * time.Minute, MinSizeFromIdleToSealed: 16, MaxBinlogFiles: 32, ChannelGrowingMB: 4096,
			AssignmentExpiration: 2 * time.Second, CheckInterval: time.Second, DroppedRetention: 3 * time.Hour},
		Manifests: manifestFlags{GCInterval: time.Minute, GCGrace: 10 * time.Minute},
		Limits: limitFlags{HTTPReadHeaderTimeout: 5 * time.Second, HTTPReadTimeout: 30 * time.Second, HTTPWriteTimeout: 2 * time.Minute,
			HTTPIdleTimeout: time.Minute, HTTPMaxConns: 1000,
			GRPCMaxStreams: 1000, GRPCKeepaliveMinTime: 10 * time.Second, GRPCHandshakeTimeout: 10 * time.Second, MaxWatchers: 1000, MaxRequestWait: 2 * time.Minute,
			MaxPendingProposals: raftnode.DefaultMaxPendingProposals},
		Security: securityFlags{Insecure: true}, MemoryLimit: defaultMemoryLimit()}
	want := func(f func(c *serveConfig)) serveConfig {
		c := base
		f(&c)
		return c
	}
	three := []raftnode.Peer{{ID: "n1", RaftAddr: "127.0.0.1:7101"}, {ID: "n2", RaftAddr: "127.0.0.1:7102"}, {ID: "n3", RaftAddr: "127.0.0.1:7103"}}

	fullFile := writeFile(t, `{
		"id": "n1", "data-dir": "/var/lib/coordd", "raft-addr": "127.0.0.1:7101",
		"grpc-addr": "127.0.0.1:7001", "http-addr": "127.0.0.1:8001",
		"peers": "n1=127.0.0.1:7101,n2=127.0.0.1:7102,n3=127.0.0.1:7103",
		"log-level": "debug", "heartbeat-timeout": "100ms", "election-timeout": "150ms",
		"leader-lease-timeout": "80ms", "commit-timeout": "5ms", "snapshot-interval": "2m",
		"snapshot-threshold": 1000000, "trailing-logs": 20000000
	}`)
	idFile := writeFile(t, `{"id": "fromfile", "log-level": "warn"}`)
	otherFile := writeFile(t, `{"id": "other"}`)
	fullEnv := env{
		"COORDD_ID": "n1", "COORDD_DATA_DIR": "/var/lib/coordd", "COORDD_RAFT_ADDR": raftAddr,
		"COORDD_GRPC_ADDR": grpcAddr, "COORDD_HTTP_ADDR": httpAddr, "COORDD_JOIN": "127.0.0.1:7002",
		"COORDD_HEARTBEAT_TIMEOUT": "300ms", "COORDD_ELECTION_TIMEOUT": "300ms", "COORDD_SNAPSHOT_THRESHOLD": "100",
	}

	tests := []struct {
		name string
		args []string
		env  env
		want serveConfig
	}{
		{"existing data dir: no peers, no join", baseArgs(), nil, base},
		{"peers", with("--peers", peers3), nil, want(func(c *serveConfig) { c.Peers = three })},
		{"peers with spaces", with("--peers", " n1=127.0.0.1:7101 , n2=127.0.0.1:7102"), nil,
			want(func(c *serveConfig) { c.Peers = three[:2] })},
		{"single-member peers", with("--peers", "n1="+raftAddr), nil, want(func(c *serveConfig) { c.Peers = three[:1] })},
		{"join", with("--join", "127.0.0.1:7002"), nil, want(func(c *serveConfig) { c.Join = "127.0.0.1:7002" })},
		{"fewer trailing logs than the threshold (the fallback keeps its own log)", with("--snapshot-threshold", "64", "--trailing-logs", "32"), nil,
			want(func(c *serveConfig) { c.Raft.SnapshotThreshold, c.Raft.TrailingLogs = 64, 32 })},
		{"quorum rounds instead of a lease", with("--lease-reads=false"), nil, want(func(c *serveConfig) { c.LeaseReads = false })},
		{"tuned raft", with("--heartbeat-timeout", "100ms", "--election-timeout", "100ms", "--leader-lease-timeout", "100ms",
			"--commit-timeout", "5ms", "--snapshot-interval", "5ms", "--snapshot-threshold", "1", "--trailing-logs", "1", "--raft-inflight-entries", "4", "--log-level", "TRACE"), nil,
			want(func(c *serveConfig) {
				c.Raft = raftnode.Config{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
					LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond, SnapshotInterval: 5 * time.Millisecond,
					SnapshotThreshold: 1, TrailingLogs: 1, MaxInflightEntries: 4, StateBudget: defaultStateBudget()}
				c.LogLevel = "TRACE"
			})},
		{"everything from the environment", nil, fullEnv, want(func(c *serveConfig) {
			c.Join = "127.0.0.1:7002"
			c.Raft.HeartbeatTimeout, c.Raft.ElectionTimeout, c.Raft.SnapshotThreshold = 300*time.Millisecond, 300*time.Millisecond, 100
			c.Raft.LeaderLeaseTimeout = 300 * time.Millisecond // follows the heartbeat timeout
		})},
		{"election and step-down timeouts follow the heartbeat timeout", with("--heartbeat-timeout", "1s"), nil, want(func(c *serveConfig) {
			c.Raft.HeartbeatTimeout, c.Raft.ElectionTimeout, c.Raft.LeaderLeaseTimeout = time.Second, time.Second, time.Second
		})},
		{"everything from a config file", []string{"--config", fullFile}, nil, want(func(c *serveConfig) {
			c.Peers, c.LogLevel = three, "debug"
			c.Raft = raftnode.Config{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
				LeaderLeaseTimeout: 80 * time.Millisecond, CommitTimeout: 5 * time.Millisecond, SnapshotInterval: 2 * time.Minute,
				SnapshotThreshold: 1000000, TrailingLogs: 20000000, MaxInflightEntries: raftnode.MaxInflightEntries, StateBudget: defaultStateBudget()}
		})},
		{"config file named by COORDD_CONFIG", []string{"--id", "n1"}, env{"COORDD_CONFIG": fullFile}, want(func(c *serveConfig) {
			c.Peers, c.LogLevel = three, "debug"
			c.Raft = raftnode.Config{HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
				LeaderLeaseTimeout: 80 * time.Millisecond, CommitTimeout: 5 * time.Millisecond, SnapshotInterval: 2 * time.Minute,
				SnapshotThreshold: 1000000, TrailingLogs: 20000000, MaxInflightEntries: raftnode.MaxInflightEntries, StateBudget: defaultStateBudget()}
		})},
		{"--config wins over COORDD_CONFIG", append(without("--id"), "--config", idFile), env{"COORDD_CONFIG": otherFile},
			want(func(c *serveConfig) { c.ID, c.LogLevel = "fromfile", "warn" })},
		{"env overrides config file", append(without("--id"), "--config", idFile), env{"COORDD_ID": "fromenv"},
			want(func(c *serveConfig) { c.ID, c.LogLevel = "fromenv", "warn" })},
		{"flag overrides env", with("--id", "fromflag"), env{"COORDD_ID": "fromenv"},
			want(func(c *serveConfig) { c.ID = "fromflag" })},
		{"flag overrides env and config file", append(with("--id", "fromflag"), "--config", idFile), env{"COORDD_ID": "fromenv"},
			want(func(c *serveConfig) { c.ID, c.LogLevel = "fromflag", "warn" })},
		{"flag overrides env for peers", with("--peers", "n1="+raftAddr), env{"COORDD_PEERS": "bad"},
			want(func(c *serveConfig) { c.Peers = three[:1] })},
		{"empty env var is unset", baseArgs(), env{"COORDD_LOG_LEVEL": ""}, base},
		{"proposal queue bound", with("--max-pending-proposals", "64"), nil,
			want(func(c *serveConfig) { c.Limits.MaxPendingProposals = 64 })},
		{"proposal queue bound from the environment", baseArgs(), env{"COORDD_MAX_PENDING_PROPOSALS": "1"},
			want(func(c *serveConfig) { c.Limits.MaxPendingProposals = 1 })},
		{"state budget with a unit", with("--state-budget", "512MiB"), nil,
			want(func(c *serveConfig) { c.Raft.StateBudget = 512 << 20 })},
		{"state budget off", with("--state-budget", "0"), nil,
			want(func(c *serveConfig) { c.Raft.StateBudget = 0 })},
		{"memory limit with a unit", with("--memory-limit", "1800MiB"), nil,
			want(func(c *serveConfig) { c.MemoryLimit = 1800 << 20 })},
		{"memory limit off", with("--memory-limit", "0"), nil,
			want(func(c *serveConfig) { c.MemoryLimit = 0 })},
		{"memory limit from the environment", baseArgs(), env{"COORDD_MEMORY_LIMIT": "2GiB"},
			want(func(c *serveConfig) { c.MemoryLimit = 2 << 30 })},
		{"state budget from the environment", baseArgs(), env{"COORDD_STATE_BUDGET": "3000000000"},
			want(func(c *serveConfig) { c.Raft.StateBudget = 3e9 })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := parseServeFlags(tc.args, tc.env.get, &stderr)
			if err != nil {
				t.Fatalf("parseServeFlags: %v (stderr %q)", err, stderr.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("config\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseDevFlags(t *testing.T) {
	valid := []struct {
		args []string
		want devConfig
	}{
		{nil, devConfig{DataDir: "./data/dev", Nodes: 3, BasePort: 7001, StreamingNodes: 2, RestartDelay: time.Second}},
		{[]string{"--nodes", "1"}, devConfig{DataDir: "./data/dev", Nodes: 1, BasePort: 7001, StreamingNodes: 2, RestartDelay: time.Second}},
		{[]string{"--nodes", "5", "--data-dir", "/tmp/x"}, devConfig{DataDir: "/tmp/x", Nodes: 5, BasePort: 7001, StreamingNodes: 2, RestartDelay: time.Second}},
		{[]string{"--base-port", "1024"}, devConfig{DataDir: "./data/dev", Nodes: 3, BasePort: 1024, StreamingNodes: 2, RestartDelay: time.Second}},
		// The highest port is HTTP base+1000+nodes-1, which may be 65535.
		{[]string{"--nodes", "1", "--base-port", "64535", "--streaming-nodes", "0"}, devConfig{DataDir: "./data/dev", Nodes: 1, BasePort: 64535, RestartDelay: time.Second}},
		{[]string{"--nodes", "5", "--base-port", "64531", "--streaming-nodes", "0"}, devConfig{DataDir: "./data/dev", Nodes: 5, BasePort: 64531, RestartDelay: time.Second}},
		{[]string{"--base-port", "64334"}, devConfig{DataDir: "./data/dev", Nodes: 3, BasePort: 64334, StreamingNodes: 2, RestartDelay: time.Second}},
		{[]string{"--restart", "--restart-delay", "2s"}, devConfig{DataDir: "./data/dev", Nodes: 3, BasePort: 7001, StreamingNodes: 2, Restart: true, RestartDelay: 2 * time.Second}},
	}
	for _, tc := range valid {
		got, err := parseDevFlags(tc.args, io.Discard)
		if err != nil || got != tc.want {
			t.Errorf("parseDevFlags(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	bad := []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"--nodes", "0"}, false, "--nodes must be 1, 3 or 5, got 0"},
		{[]string{"--nodes", "2"}, false, "--nodes must be 1, 3 or 5, got 2"},
		{[]string{"--nodes", "4"}, false, "got 4"},
		{[]string{"--nodes", "7"}, false, "got 7"},
		{[]string{"--nodes", "-1"}, false, "got -1"},
		{[]string{"--base-port", "1023"}, false, "--base-port 1023 leaves no room for 3 members"},
		{[]string{"--base-port", "0"}, false, "--base-port 0"},
		{[]string{"--nodes", "1", "--base-port", "64536"}, false, "--base-port 64536 leaves no room for 1 members below 65536"},
		{[]string{"--nodes", "5", "--base-port", "64532"}, false, "--base-port 64532 leaves no room for 5 members"},
		{[]string{"--base-port", "70000"}, false, "--base-port 70000"},
		{[]string{"--base-port", "64335"}, false, "--base-port 64335 leaves no room for the metrics of 2 streaming nodes"},
		{[]string{"stray"}, false, `unexpected argument "stray"`},
		{[]string{"--nodes", "three"}, true, "usage"},
		{[]string{"--peers", "x"}, true, "usage"},
	}
	for _, tc := range bad {
		_, err := parseDevFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseDevFlags(%q) error %v; want one containing %q", tc.args, err, tc.want)
			continue
		}
		if _, isConfig := err.(configError); tc.usage != errors.Is(err, errUsage) || !tc.usage && !isConfig {
			t.Errorf("parseDevFlags(%q) error %v is a %T; want usage=%v", tc.args, err, err, tc.usage)
		}
	}
}

// clearEnv hides any COORDD_* variables of the real environment from run.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "COORDD_") {
			t.Setenv(k, "")
		}
	}
}

// TestRunExitCodes calls run with arguments that fail before anything
// starts: bad configuration and usage errors exit 2 with a message.
func TestRunExitCodes(t *testing.T) {
	clearEnv(t)
	t.Setenv("COORDD_INSECURE", "true")
	tests := []struct {
		name   string
		args   []string
		env    env
		code   int
		stderr string
		stdout string
	}{
		{name: "serve: no flags", args: []string{"serve"}, code: 2, stderr: "coordd: --id"},
		{name: "implicit serve: bad id", args: with("--id", "a b"), code: 2, stderr: `coordd: --id: member id "a b"`},
		{name: "serve: unknown flag", args: []string{"serve", "--bogus"}, code: 2, stderr: "flag provided but not defined: -bogus"},
		{name: "serve: bad peers", args: append([]string{"serve"}, with("--peers", "n2=127.0.0.1:7102")...), code: 2, stderr: "does not list this member"},
		{name: "serve: lease > heartbeat", args: with("--leader-lease-timeout", "1s"), code: 2, stderr: "must not exceed"},
		{name: "serve: bad env value", args: baseArgs(), env: env{"COORDD_COMMIT_TIMEOUT": "fast"}, code: 2, stderr: `COORDD_COMMIT_TIMEOUT="fast"`},
		{name: "serve: bad config file", args: with("--config", writeFile(t, "{")), code: 2, stderr: "not a JSON object"},
		{name: "dev: bad node count", args: []string{"dev", "--nodes", "2"}, code: 2, stderr: "--nodes must be 1, 3 or 5"},
		{name: "dev: unknown flag", args: []string{"dev", "--bogus"}, code: 2, stderr: "flag provided but not defined"},
		{name: "help", args: []string{"help"}, code: 0, stdout: "usage:"},
		// --help exits 0 everywhere, with the subcommand's flags.
		{name: "serve --help", args: []string{"serve", "--help"}, code: 0, stderr: "-data-dir"},
		{name: "dev --help", args: []string{"dev", "--help"}, code: 0, stderr: "-restart-delay"},
		{name: "restore --help", args: []string{"restore", "--help"}, code: 0, stderr: "-snapshot"},
		{name: "inspect --help", args: []string{"inspect", "--help"}, code: 0, stderr: "-data-dir"},
		{name: "recover -h", args: []string{"recover", "-h"}, code: 0, stderr: "-peers-file"},
		{name: "--version", args: []string{"--version"}, code: 0, stdout: "log format: "},
		{name: "version", args: []string{"version"}, code: 0, stdout: "coordd "},
		{name: "dev: negative restart delay", args: []string{"dev", "--restart-delay", "-1s"}, code: 2, stderr: "--restart-delay must not be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("run(%q) = %d; want %d (stderr %q)", tc.args, code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.stderr)
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.stdout)
			}
		})
	}
}

func TestMemoryLimitDefault(t *testing.T) {
	for _, tc := range []struct {
		cgroup, want int64
	}{
		{1 << 62, 0},          // no cgroup limit: the runtime's own setting
		{0, 0},                // unreadable
		{4 << 30, 3865470561}, // 9/10 of a 4 GiB cgroup (rounded down per tenth)
	} {
		if got := memoryLimitFor(tc.cgroup); got != tc.want {
			t.Errorf("memoryLimitFor(%d) = %d, want %d", tc.cgroup, got, tc.want)
		}
	}
}

// TestApplyMemoryLimitSetsTheCollectorsLimit: a configured limit reaches
// the runtime; 0 leaves the runtime's own setting alone.
func TestApplyMemoryLimitSetsTheCollectorsLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	applyMemoryLimit(0, 1<<30, hclog.NewNullLogger())
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("limit 0 changed the runtime's limit to %d", got)
	}
	applyMemoryLimit(3<<30, 1<<30, hclog.NewNullLogger())
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Fatalf("runtime limit %d, want %d", got, int64(3<<30))
	}
}
