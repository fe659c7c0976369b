package main

import (
	"flag"
	"syscall"
	"time"

	"github.com/coordd/coordd/raftnode"
)

// fdReserve is how many file descriptors the connection caps leave for
// raft (its transport and log store), the snapshot store and gRPC.
const fdReserve = 256

// limitFlags bound what clients can make a member hold: connections,
// streams, watchers, waits and queued proposals. Each is exported as coordd_limit_*.
type limitFlags struct {
	HTTPReadTimeout, HTTPWriteTimeout, HTTPIdleTimeout time.Duration
	HTTPMaxConns                                       int
	GRPCMaxStreams                                     int
	GRPCKeepaliveMinTime                               time.Duration
	MaxWatchers                                        int
	MaxRequestWait                                     time.Duration
	MaxPendingProposals                                int
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&l.HTTPReadTimeout, "http-read-timeout", 30*time.Second, "longest time to read one HTTP request, body included")
	fs.DurationVar(&l.HTTPWriteTimeout, "http-write-timeout", 2*time.Minute, "longest time to handle and write one HTTP response (snapshot downloads included)")
	fs.DurationVar(&l.HTTPIdleTimeout, "http-idle-timeout", time.Minute, "how long an idle keep-alive HTTP connection is kept")
	fs.IntVar(&l.HTTPMaxConns, "http-max-conns", 1000, "HTTP connections open at once; more are answered 503 and closed")
	fs.IntVar(&l.GRPCMaxStreams, "grpc-max-streams", 1000, "concurrent gRPC streams (calls) per client connection")
	fs.DurationVar(&l.GRPCKeepaliveMinTime, "grpc-keepalive-min-time", 10*time.Second, "clients pinging more often than this are disconnected")
	fs.IntVar(&l.MaxWatchers, "max-watchers", 1000, "assignment watch streams open at once on this member; more get ResourceExhausted")
	fs.DurationVar(&l.MaxRequestWait, "max-request-wait", 2*time.Minute, "longest a unary gRPC call may wait on this member, whatever its deadline")
	fs.IntVar(&l.MaxPendingProposals, "max-pending-proposals", raftnode.DefaultMaxPendingProposals,
		"proposals waiting for the raft log at once while the leader's apply pipeline is saturated; more get ResourceExhausted (HTTP 429) with a retry hint")
}

func (l limitFlags) validate() error {
	for name, d := range map[string]time.Duration{"--http-read-timeout": l.HTTPReadTimeout, "--http-write-timeout": l.HTTPWriteTimeout,
		"--http-idle-timeout": l.HTTPIdleTimeout, "--grpc-keepalive-min-time": l.GRPCKeepaliveMinTime, "--max-request-wait": l.MaxRequestWait} {
		if d < 100*time.Millisecond {
			return badConfig("%s must be at least 100ms, got %v", name, d)
		}
	}
	for name, n := range map[string]int{"--http-max-conns": l.HTTPMaxConns, "--grpc-max-streams": l.GRPCMaxStreams, "--max-watchers": l.MaxWatchers,
		"--max-pending-proposals": l.MaxPendingProposals} {
		if n < 1 || n > 1<<20 {
			return badConfig("%s must be in 1..%d, got %d", name, 1<<20, n)
		}
	}
	return nil
}

// checkFDs refuses an HTTP connection cap that would leave fewer than
// fdReserve of the process's file descriptors for raft, bolt and gRPC.
func (l limitFlags) checkFDs() error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return nil // unknown: nothing to check against
	}
	if uint64(l.HTTPMaxConns)+fdReserve > rl.Cur {
		return badConfig("--http-max-conns %d leaves fewer than %d of the %d file descriptors (ulimit -n) for raft, bolt and gRPC",
			l.HTTPMaxConns, fdReserve, rl.Cur)
	}
	return nil
}
