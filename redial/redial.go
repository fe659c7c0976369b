// Package redial owns the reconnect policy of coordd's long-lived gRPC
// connections (leader to streaming nodes, follower to leader, streaming
// node to coordd, SDK to members): a bounded redial backoff, and a wake-up
// of a connection in transient failure before a call that the caller is
// retrying on its own schedule.
//
// gRPC's defaults suit a client with nothing better to do: its reconnect
// backoff grows to 120 s, and while it runs every call on the connection
// fails at once with the last dial error. Between coordd's processes a
// peer that restarts at the same address is an ordinary event, and every
// caller here already retries with its own backoff, so a second, hidden
// backoff in the connection only delays recovery: a node back within a
// second stayed unreachable for seconds (docs/architecture.md#reconnecting).
package redial

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
)

// MaxDelay is the longest a connection waits between its own redials.
const MaxDelay = time.Second

// Params are the connect parameters of a connection: a first redial after
// 100 ms, growing 1.6× with 20 % jitter up to MaxDelay, each attempt given
// at least minConnectTimeout (gRPC's 20 s when <= 0).
func Params(minConnectTimeout time.Duration) grpc.ConnectParams {
	if minConnectTimeout <= 0 {
		minConnectTimeout = 20 * time.Second
	}
	return grpc.ConnectParams{
		Backoff: backoff.Config{
			BaseDelay:  100 * time.Millisecond,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   MaxDelay,
		},
		MinConnectTimeout: minConnectTimeout,
	}
}

// Option is Params as a dial option.
func Option(minConnectTimeout time.Duration) grpc.DialOption {
	return grpc.WithConnectParams(Params(minConnectTimeout))
}

// Wake makes conn dial again now if it is in transient failure, so that
// the call about to be made (a caller's retry) is a real attempt. The
// call itself may still fail at once while the new dial is in flight;
// the caller's next retry then finds the connection ready.
func Wake(conn *grpc.ClientConn) {
	if conn != nil && conn.GetState() == connectivity.TransientFailure {
		conn.ResetConnectBackoff()
	}
}
