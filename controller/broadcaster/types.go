package broadcaster

import (
	"errors"
	"time"

	"github.com/coordd/coordd/commands/logpb"
)

// Request is one broadcast as the API hands it to the manager.
type Request struct {
	MessageType  string
	Payload      []byte
	ResourceKeys []*logpb.ResourceKey
	// VChannels are the targets; the manager adds the CChannel when absent.
	VChannels []string
	AckSyncUp bool
	// IdempotencyKey is a scoped key (commands.ClusterScopedKey and
	// friends) or "".
	IdempotencyKey string
}

// Result is what a completed (tombstoned) broadcast returns.
type Result struct {
	BroadcastID uint64
	Duplicated  bool
	// Checkpoints are the persisted per-VChannel append results.
	Checkpoints []*logpb.VChannelCheckpoint
	// LockWait is how long the call waited for its resource keys.
	LockWait time.Duration
}

var (
	// ErrNotPrimary: the cluster is a replication secondary; nothing was
	// locked or created.
	ErrNotPrimary = errors.New("cluster is not primary, cannot do any DDL/DCL")
	// ErrNotLeader: this node cannot run broadcasts (the API forwards).
	ErrNotLeader = errors.New("broadcaster: this node is not the established leader")
	// ErrAbandoned: the task was abandoned by an operator.
	ErrAbandoned = errors.New("broadcast abandoned")
)

// LockTimeoutError says which key a broadcast waited for, and how long,
// when its deadline ran out before the locks were granted.
type LockTimeoutError struct {
	Key    string        // e.g. "CollectionName:db1:c1@X"
	Waited time.Duration // total wait
	Err    error         // the context's error
}

func (e *LockTimeoutError) Error() string {
	return "waited " + e.Waited.Round(time.Millisecond).String() + " for resource key " + e.Key + ": " + e.Err.Error()
}

func (e *LockTimeoutError) Unwrap() error { return e.Err }
