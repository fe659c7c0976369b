package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/logging"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/vocab"
)

// errUsage: flag parsing already printed the problem and usage.
var errUsage = errors.New("usage")

// errHelp: -h/--help printed the usage; the exit status is 0.
var errHelp = errors.New("help")

// parseFlags parses args into fs: errHelp for -h/--help, errUsage for any
// other parse failure (the flag package has printed it and the usage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return errUsage
	}
	return nil
}

// configError marks bad configuration (exit status 2).
type configError struct{ error }

func badConfig(format string, args ...any) error { return configError{fmt.Errorf(format, args...)} }

// serveConfig is everything `coordd serve` needs.
type serveConfig struct {
	ID, DataDir, RaftAddr, GRPCAddr, HTTPAddr string
	Peers                                     []raftnode.Peer
	Join                                      string
	LogLevel                                  string
	LogFormat                                 string
	EnablePprof                               bool
	LeaseReads                                bool // rc.LeaderLease from --heartbeat-timeout (openNode)
	ReadyMaxLag                               uint64
	RaftDial                                  map[string]string
	TestOnlyUnsafeIDReuse                     bool
	TestOnlyUnsafeBroadcastOrder              bool
	TestOnlySkipIdentityCheck                 bool
	FaultInjection                            bool
	MemoryLimit                               int64 // --memory-limit: the collector's soft limit (memflags.go)
	Channels                                  channelFlags
	Broadcast                                 broadcastFlags
	Segments                                  segmentFlags
	Manifests                                 manifestFlags
	Limits                                    limitFlags
	Security                                  securityFlags
	Raft                                      raftnode.Config
}

func parseServeFlags(args []string, getenv func(string) string, stderr io.Writer) (serveConfig, error) {
	fs := flag.NewFlagSet("coordd serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serveConfig
	var peers, configFile string
	fs.StringVar(&configFile, "config", "", "JSON config file keyed by flag name")
	fs.StringVar(&c.ID, "id", "", "member ID (letters, digits, '.', '_', '-')")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory for the raft log, stable store and snapshots")
	fs.StringVar(&c.RaftAddr, "raft-addr", "", "raft transport address host:port (bound and advertised)")
	fs.StringVar(&c.GRPCAddr, "grpc-addr", "", "gRPC listen address host:port")
	fs.StringVar(&c.HTTPAddr, "http-addr", "", "HTTP/JSON listen address host:port")
	fs.StringVar(&peers, "peers", "", "static bootstrap list id=raftaddr,... (identical on every member)")
	fs.StringVar(&c.Join, "join", "", "gRPC address of any member of a running cluster to join")
	fs.StringVar(&c.LogLevel, "log-level", "info", "trace, debug, info, warn or error (changeable at runtime: coordctl log-level)")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log line format: text or json")
	fs.BoolVar(&c.TestOnlyUnsafeIDReuse, "test-only-unsafe-id-reuse", false,
		"TEST ONLY: break the ID allocator (no committed reservation) so the Jepsen-style checkers can be shown to catch it")
	fs.BoolVar(&c.TestOnlyUnsafeBroadcastOrder, "test-only-unsafe-broadcast-order", false,
		"TEST ONLY: break the broadcaster (resource keys released once a task is created, not when it is done) so the Jepsen-style checkers can be shown to catch conflicting broadcasts out of order")
	fs.BoolVar(&c.TestOnlySkipIdentityCheck, "test-only-skip-identity-check", false,
		"TEST ONLY: accept a data dir that lost its raft state and raft connections from any cluster, so the Jepsen-style disk-loss scenario can be shown to catch it")
	fs.BoolVar(&c.FaultInjection, "fault-injection", false,
		"TEST ONLY: serve /debug/raft-delay (admin), which holds raft RPCs of a kind this member receives, for the Jepsen-style raft-delay nemesis")
	var raftDial string
	fs.StringVar(&raftDial, "raft-dial", "", "dial overrides id=host:port,... for raft links to those members (fault-injection proxies in tests)")
	fs.BoolVar(&c.EnablePprof, "enable-pprof", false, "serve Go profiles under /debug/pprof/ on the HTTP address")
	fs.Uint64Var(&c.ReadyMaxLag, "ready-max-lag", raftnode.DefaultReadyMaxLag,
		"/readyz answers 503 when this member is more than this many entries behind the commit index a leader told it about")
	c.Channels.register(fs)
	c.Broadcast.register(fs)
	c.Segments.register(fs)
	c.Manifests.register(fs)
	c.Limits.register(fs)
	c.Security.register(fs)
	fs.DurationVar(&c.Raft.HeartbeatTimeout, "heartbeat-timeout", raftnode.DefaultHeartbeatTimeout, "raft heartbeat timeout: a follower that hears no leader this long (randomized up to twice it) starts an election; writes wait that long, plus the election, after a leader dies")
	fs.DurationVar(&c.Raft.ElectionTimeout, "election-timeout", 0, "raft election timeout: a candidate that has no majority this long (randomized up to twice it) tries again (0: the heartbeat timeout)")
	fs.DurationVar(&c.Raft.LeaderLeaseTimeout, "leader-lease-timeout", 0, "raft leader lease (<= heartbeat timeout): a leader that hears from no majority this long steps down (0: the heartbeat timeout)")
	fs.DurationVar(&c.Raft.CommitTimeout, "commit-timeout", 20*time.Millisecond, "raft commit timeout")
	fs.DurationVar(&c.Raft.SnapshotInterval, "snapshot-interval", 30*time.Second, "how often raft checks whether to snapshot")
	fs.Uint64Var(&c.Raft.SnapshotThreshold, "snapshot-threshold", 8192, "log entries since the last snapshot that trigger one")
	fs.Uint64Var(&c.Raft.TrailingLogs, "trailing-logs", 10240, "log entries kept after a snapshot")
	fs.BoolVar(&c.LeaseReads, "lease-reads", true,
		"answer linearizable reads and allocations inside a leader lease (9/10 of --heartbeat-timeout after a committed entry) instead of a quorum round per call; "+
			"every member must run the same --heartbeat-timeout, and a member waits one lease before starting raft")
	fs.StringVar(&c.Raft.LogStore, "raft-log-store", "",
		"where the raft log lives: wal (raft-wal segments under wal/, one fsync per append) or bolt (raft.db); "+
			"default: the store the data dir was created with, wal for a new one; asking for the other store is refused (docs/operations.md#raft-log-store)")
	fs.IntVar(&c.Raft.WALSegmentSize, "raft-wal-segment-size", 0,
		"bytes raft-wal preallocates each log segment to (wal log store only; 0: raft-wal's 64 MiB); the log is compacted a whole segment at a time, "+
			"so smaller segments make members behind the compacted log catch up by snapshot sooner (docs/operations.md#raft-log-store)")
	registerStateBudget(fs, &c.Raft.StateBudget)
	registerMemoryLimit(fs, &c.MemoryLimit)
	fs.IntVar(&c.Raft.MaxInflightEntries, "raft-inflight-entries", raftnode.MaxInflightEntries,
		"log entries the group-commit batcher keeps with raft at once; fewer make each entry (and fsync) carry more commands")
	if err := parseFlags(fs, args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, badConfig("unexpected argument %q", fs.Arg(0))
	}
	if err := fillFromEnvAndFile(fs, getenv, configFile); err != nil {
		return c, err
	}
	var err error
	if c.RaftDial, err = parseRaftDial(fs.Lookup("raft-dial").Value.String()); err != nil {
		return c, err
	}
	peersFlag := fs.Lookup("peers").Value.String()
	if c.Peers, err = cluster.ParsePeers(peersFlag); err != nil {
		return c, badConfig("--peers: %s", err)
	}
	// Unset election and step-down timeouts follow the heartbeat timeout,
	// so one flag retunes all three (docs/operations.md#raft-timeouts).
	if c.Raft.ElectionTimeout == 0 {
		c.Raft.ElectionTimeout = c.Raft.HeartbeatTimeout
	}
	if c.Raft.LeaderLeaseTimeout == 0 {
		c.Raft.LeaderLeaseTimeout = c.Raft.HeartbeatTimeout
	}
	return c, c.validate()
}

// fillFromEnvAndFile sets every flag not given on the command line from
// COORDD_<NAME> or, failing that, from the config file.
func fillFromEnvAndFile(fs *flag.FlagSet, getenv func(string) string, configFile string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if configFile == "" {
		configFile = getenv("COORDD_CONFIG")
	}
	fileVals := map[string]any{}
	if configFile != "" {
		data, err := os.ReadFile(configFile)
		if err != nil {
			return badConfig("--config: %v", err)
		}
		// Keep numbers as written: fmt.Sprint of a float64 turns 1000000
		// into "1e+06", which an integer flag rejects.
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&fileVals); err != nil {
			return badConfig("--config %s: not a JSON object: %v", configFile, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return badConfig("--config %s: not a JSON object: data after the object", configFile)
		}
		for k := range fileVals {
			if fs.Lookup(k) == nil || k == "config" {
				return badConfig("--config %s: unknown key %q", configFile, k)
			}
		}
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || f.Name == "config" {
			return
		}
		env := "COORDD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, badConfig("%s=%q: %v", env, v, err))
			}
			return
		}
		if v, ok := fileVals[f.Name]; ok {
			if err := f.Value.Set(fmt.Sprint(v)); err != nil {
				errs = append(errs, badConfig("--config key %q=%v: %v", f.Name, v, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return configError{err}
	}
	return nil
}

func (c serveConfig) validate() error {
	if err := vocab.ValidateMemberID(c.ID); err != nil {
		return badConfig("--id: %s", err)
	}
	if c.DataDir == "" {
		return badConfig("--data-dir is required")
	}
	for _, a := range []struct{ name, v string }{{"--raft-addr", c.RaftAddr}, {"--grpc-addr", c.GRPCAddr}, {"--http-addr", c.HTTPAddr}} {
		if err := vocab.ValidateAddr(a.name, a.v, true); err != nil {
			return badConfig("%s", err)
		}
	}
	if c.RaftAddr == c.GRPCAddr || c.RaftAddr == c.HTTPAddr || c.GRPCAddr == c.HTTPAddr {
		return badConfig("--raft-addr, --grpc-addr and --http-addr must differ")
	}
	if c.Raft.LeaderLeaseTimeout > c.Raft.HeartbeatTimeout {
		return badConfig("--leader-lease-timeout (%v) must not exceed --heartbeat-timeout (%v)", c.Raft.LeaderLeaseTimeout, c.Raft.HeartbeatTimeout)
	}
	if c.Raft.ElectionTimeout < c.Raft.HeartbeatTimeout {
		return badConfig("--election-timeout (%v) must be at least --heartbeat-timeout (%v)", c.Raft.ElectionTimeout, c.Raft.HeartbeatTimeout)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--heartbeat-timeout", c.Raft.HeartbeatTimeout}, {"--election-timeout", c.Raft.ElectionTimeout},
		{"--leader-lease-timeout", c.Raft.LeaderLeaseTimeout}, {"--commit-timeout", c.Raft.CommitTimeout},
		{"--snapshot-interval", c.Raft.SnapshotInterval}} {
		if d.v < 5*time.Millisecond {
			return badConfig("%s must be at least 5ms, got %v", d.name, d.v)
		}
	}
	if c.Raft.LogStore != "" && !datadir.ValidLogStore(c.Raft.LogStore) {
		return badConfig("--raft-log-store must be %s or %s, got %q", datadir.LogStoreBolt, datadir.LogStoreWAL, c.Raft.LogStore)
	}
	if c.Raft.WALSegmentSize != 0 && (c.Raft.WALSegmentSize < minWALSegmentSize || c.Raft.WALSegmentSize > maxWALSegmentSize) {
		return badConfig("--raft-wal-segment-size must be 0 (raft-wal's default) or in %d..%d bytes, got %d",
			minWALSegmentSize, maxWALSegmentSize, c.Raft.WALSegmentSize)
	}
	if c.Raft.MaxInflightEntries < 1 || c.Raft.MaxInflightEntries > raftnode.MaxInflightEntriesLimit {
		return badConfig("--raft-inflight-entries must be in 1..%d, got %d", raftnode.MaxInflightEntriesLimit, c.Raft.MaxInflightEntries)
	}
	if c.ReadyMaxLag == 0 {
		return badConfig("--ready-max-lag must be positive")
	}
	if c.Raft.SnapshotThreshold == 0 || c.Raft.TrailingLogs == 0 {
		return badConfig("--snapshot-threshold and --trailing-logs must be positive")
	}
	// Any --trailing-logs is safe for the snapshot fallback: raftnode never
	// compacts the log past the older retained snapshot
	// (docs/operations.md, the snapshot fallback).
	if _, _, err := logging.ParseLevel(c.LogLevel); err != nil {
		return badConfig("--log-level %q: want trace, debug, info, warn or error", c.LogLevel)
	}
	if err := logging.CheckFormat(c.LogFormat); err != nil {
		return badConfig("--log-format %q: want text or json", c.LogFormat)
	}
	if err := c.Channels.validate(); err != nil {
		return err
	}
	if err := c.Segments.validate(); err != nil {
		return err
	}
	if err := c.Manifests.validate(); err != nil {
		return err
	}
	if err := c.Broadcast.validate(); err != nil {
		return err
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	if err := c.Security.validate(); err != nil {
		return err
	}
	if err := cluster.CheckOptions(cluster.Options{Self: selfOf(c), Peers: c.Peers, Join: c.Join}); err != nil {
		return badConfig("%s", err)
	}
	return nil
}

// parseRaftDial parses --raft-dial id=host:port,...
func parseRaftDial(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, badConfig("--raft-dial %q: want id=host:port", part)
		}
		if err := vocab.ValidateMemberID(id); err != nil {
			return nil, badConfig("--raft-dial %q: %s", part, err)
		}
		if err := vocab.ValidateAddr("--raft-dial address", addr, true); err != nil {
			return nil, badConfig("--raft-dial %q: %s", part, err)
		}
		if _, dup := out[id]; dup {
			return nil, badConfig("--raft-dial names %s twice", id)
		}
		out[id] = addr
	}
	return out, nil
}

// Bounds of --raft-wal-segment-size. raft-wal writes a batch into the
// current segment even past its size (and seals it after), so any size
// works; small ones make a busy member seal a segment every few appends
// (the tests use them to compact the log early), and raft-wal addresses a
// segment's frames with 32-bit offsets.
const (
	minWALSegmentSize = 4 << 10
	maxWALSegmentSize = 1 << 30
)
