package main

import (
	"flag"
	"syscall"
	"time"

	"github.com/coordd/coordd/api/httpgateway"
	"github.com/coordd/coordd/raftnode"
)

// fdReserve is how many file descriptors the connection caps leave for
// raft (its transport and log store), the snapshot store and gRPC.
const fdReserve = 256

// limitFlags bound what clients can make a member hold: connections,
// streams, watchers, waits and queued proposals. Each is exported as coordd_limit_*.
type limitFlags struct {
	HTTPReadHeaderTimeout                              time.Duration
	HTTPReadTimeout, HTTPWriteTimeout, HTTPIdleTimeout time.Duration
	HTTPMaxConns, HTTPMaxUnauthenticatedConns          int
	GRPCMaxStreams                                     int
	GRPCKeepaliveMinTime, GRPCHandshakeTimeout         time.Duration
	MaxWatchers                                        int
	MaxRequestWait                                     time.Duration
	MaxPendingProposals                                int
}

func (l *limitFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&l.HTTPReadHeaderTimeout, "http-read-header-timeout", 5*time.Second,
		"longest time for an HTTP client to finish the TLS handshake and send a request's headers; a slower connection is closed")
	fs.DurationVar(&l.HTTPReadTimeout, "http-read-timeout", 30*time.Second, "longest time to read one HTTP request, body included")
	fs.DurationVar(&l.HTTPWriteTimeout, "http-write-timeout", 2*time.Minute, "longest time to handle and write one HTTP response (snapshot downloads included)")
	fs.DurationVar(&l.HTTPIdleTimeout, "http-idle-timeout", time.Minute, "how long an idle keep-alive HTTP connection is kept")
	fs.IntVar(&l.HTTPMaxConns, "http-max-conns", 1000,
		"HTTP connections open at once; at the cap a new connection evicts the one that has waited longest for its request, or is answered 503 when every connection is serving one")
	fs.IntVar(&l.HTTPMaxUnauthenticatedConns, "http-max-unauthenticated-conns", 0,
		"HTTP connections open at once that have not yet carried an authenticated request (0: half of --http-max-conns); past it a new connection evicts the longest-waiting of them")
	fs.IntVar(&l.GRPCMaxStreams, "grpc-max-streams", 1000, "concurrent gRPC streams (calls) per client connection")
	fs.DurationVar(&l.GRPCKeepaliveMinTime, "grpc-keepalive-min-time", 10*time.Second, "clients pinging more often than this are disconnected")
	fs.DurationVar(&l.GRPCHandshakeTimeout, "grpc-handshake-timeout", 10*time.Second,
		"longest time for a new gRPC connection to finish its TLS and HTTP/2 handshake; a slower one is closed")
	fs.IntVar(&l.MaxWatchers, "max-watchers", 1000, "assignment watch streams open at once on this member; more get ResourceExhausted")
	fs.DurationVar(&l.MaxRequestWait, "max-request-wait", 2*time.Minute, "longest a unary gRPC call may wait on this member, whatever its deadline")
	fs.IntVar(&l.MaxPendingProposals, "max-pending-proposals", raftnode.DefaultMaxPendingProposals,
		"proposals waiting for the raft log at once while the leader's apply pipeline is saturated; more get ResourceExhausted (HTTP 429) with a retry hint")
}

func (l limitFlags) validate() error {
	for name, d := range map[string]time.Duration{"--http-read-header-timeout": l.HTTPReadHeaderTimeout,
		"--grpc-handshake-timeout": l.GRPCHandshakeTimeout, "--http-read-timeout": l.HTTPReadTimeout, "--http-write-timeout": l.HTTPWriteTimeout,
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
	if l.HTTPReadHeaderTimeout > l.HTTPReadTimeout {
		return badConfig("--http-read-header-timeout (%v) must not exceed --http-read-timeout (%v), which covers the headers too",
			l.HTTPReadHeaderTimeout, l.HTTPReadTimeout)
	}
	if n := l.HTTPMaxUnauthenticatedConns; n < 0 || n > l.HTTPMaxConns {
		return badConfig("--http-max-unauthenticated-conns must be in 0..%d (--http-max-conns; 0: half of it), got %d", l.HTTPMaxConns, n)
	}
	return nil
}

// httpConnLimits are the HTTP port's connection caps.
func (l limitFlags) httpConnLimits() httpgateway.ConnLimits {
	un := l.HTTPMaxUnauthenticatedConns
	if un == 0 {
		un = max(l.HTTPMaxConns/2, 1)
	}
	return httpgateway.ConnLimits{Max: l.HTTPMaxConns, MaxUnauthenticated: un}
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
