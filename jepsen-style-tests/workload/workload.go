// Package workload generates client traffic for Jepsen-style runs and
// records every operation in a history. A workload also names the checkers
// that judge its history, so scenarios can combine workloads (allocators
// now; channel assignment and WAL appends once streaming nodes exist).
package workload

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// Env is what a workload runs against.
type Env struct {
	// Endpoints(first) lists the gRPC endpoints starting at member first,
	// so clients can prefer different members.
	Endpoints func(first int) []string
	Members   int
	Recorder  *history.Recorder
	Seed      uint64
	// ClientBase numbers this workload's clients (history client IDs are
	// ClientBase, ClientBase+1, ...), so workloads never share IDs.
	ClientBase int
	// WALDir is the streaming nodes' shared WAL directory ("" without
	// streaming nodes).
	WALDir string
	// Creds authenticate the clients on a secure run (nil: insecure);
	// build client configurations with ClientConfig(role, ...).
	Creds *Credentials
}

// Workload is one kind of client traffic plus its checkers.
type Workload interface {
	Name() string
	// Clients is how many history client IDs the workload uses.
	Clients() int
	// Run generates traffic until ctx ends, recording into env.Recorder.
	Run(ctx context.Context, env Env) error
	// Check judges the workload's part of the history. dir is where
	// artifacts (e.g. porcupine HTML) may be written; notes annotate them.
	Check(ops []history.Op, dir string, notes []checker.Annotation) []checker.Result
}

// Classify maps a client call's error to a history outcome: definite
// failures (the request was rejected before anything could happen) are
// fail; everything else — timeouts, unavailability (the request may have
// reached a leader before the connection broke), answers marked
// coordd-outcome: unknown — is info.
func Classify(err error) history.Type {
	if err == nil {
		return history.Ok
	}
	if client.IsOutcomeUnknown(err) {
		return history.Info
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return history.Info
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented, codes.OutOfRange:
		return history.Fail
	}
	return history.Info
}

// ClientConfig is the client configuration workloads use: short timeouts so
// operations during faults end (as info) rather than pile up.
func ClientConfig(endpoints []string) client.Config {
	return client.Config{
		Endpoints:      endpoints,
		DialTimeout:    500 * time.Millisecond,
		RequestTimeout: 3 * time.Second,
		AttemptTimeout: time.Second,
	}
}
