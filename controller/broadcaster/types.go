package broadcaster

import (
	"errors"
	"fmt"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/vocab"
)

// Request is one broadcast as the API hands it to the manager.
type Request struct {
	MessageType  string
	Payload      []byte
	ResourceKeys []*logpb.ResourceKey
	// VChannels are the targets; none means the manager chooses them
	// (Manager.Broadcast). The manager adds the CChannel when absent.
	VChannels []string
	AckSyncUp bool
	// IdempotencyKey is a scoped key (vocab.ClusterScopedKey and
	// friends) or "".
	IdempotencyKey string
	// RequestID, optional, is the request ID of the CreateBroadcast
	// command (a retried call with the same ID gets the same task). When
	// empty the manager makes one, so its own retries after an unknown
	// outcome are safe.
	RequestID string
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
	// locked or created. It is a refusal of class REJECT_NOT_PRIMARY, so
	// errors.Is matches it for the manager's own check and for Apply's
	// refusal alike, and the API maps both with the rejection table.
	ErrNotPrimary error = &commands.RejectedError{Code: logpb.RejectCode_REJECT_NOT_PRIMARY,
		Message: "cluster is not primary, cannot do any DDL/DCL"}
	// errNotLeader: this node cannot run broadcasts (the API forwards). It
	// is leadership.ErrNotLeader.
	errNotLeader = fmt.Errorf("broadcaster: %w", leadership.ErrNotLeader)
	// ErrAbandoned: the task was abandoned by an operator.
	ErrAbandoned = vocab.NewSentinel(vocab.ClassConflict, "broadcast abandoned")
	// ErrTaskNotFound: no such broadcast task (never created, or its
	// tombstone was pruned).
	ErrTaskNotFound = vocab.NewSentinel(vocab.ClassNotFound, "broadcast task not found")
	// ErrTaskFinished: the task is already a TOMBSTONE.
	ErrTaskFinished = vocab.NewSentinel(vocab.ClassPrecondition, "broadcast task already finished")

	// errLocksClosed: the lock table of an ended leadership.
	errLocksClosed = errors.New("broadcaster: lock table closed")
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

// Is makes a LockTimeoutError of class vocab.ClassTimeout, whether the
// wait ended at its deadline or was cancelled.
func (e *LockTimeoutError) Is(target error) bool { return target == vocab.ErrTimeout }
