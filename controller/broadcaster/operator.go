package broadcaster

import (
	"context"
	"fmt"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// An operator's two actions on a stuck task (docs/semantics.md#broadcast-lifecycle):
// retry it now, or give up on it. Both act only on a task that is pending
// in the newest applied state; the manager, not the API, makes that
// decision, so every caller gets the same answer.

// Retry wakes a pending task now: its backoff is reset and, for an
// ack_sync_up task, unacked targets are appended again. ErrTaskNotFound
// for an unknown task, ErrTaskFinished for a finished one.
func (m *Manager) Retry(id uint64) error {
	ts := m.current()
	if ts == nil || m.leader.EstablishedTerm() != ts.term {
		return errNotLeader
	}
	if err := m.checkPending(id); err != nil {
		return err // before the scheduler, so both actions answer alike
	}
	return ts.retry(id)
}

// Abandon gives up on a pending task (an operator's decision, typically for
// a callback that keeps failing): the FSM tombstones it without running its
// callback and records reason; its locks are released and its Broadcast
// callers return ErrAbandoned. ErrTaskNotFound for an unknown task,
// ErrTaskFinished for a finished one; nothing is proposed for either.
func (m *Manager) Abandon(ctx context.Context, id uint64, reason string) error {
	if m.leader.EstablishedTerm() == 0 {
		return errNotLeader
	}
	if err := m.checkPending(id); err != nil {
		return err
	}
	if _, err := commands.CommitNew(ctx, m.leader, &logpb.AbandonBroadcast{BroadcastId: id, Reason: reason}, ""); err != nil {
		return err
	}
	m.log.Warn("broadcast abandoned", "id", id, "reason", reason)
	if ts := m.current(); ts != nil {
		ts.finishExternal(id)
	}
	return nil
}

// checkPending refuses a task that the newest applied state does not hold
// as pending. The state may be behind the leader's commit index: a task
// finished since is refused by Apply (Abandon) or is a no-op (Retry).
func (m *Manager) checkPending(id uint64) error {
	t, ok := m.leader.State().BroadcastTask(id)
	switch {
	case !ok:
		return fmt.Errorf("broadcast %d is unknown (never created, or its tombstone was pruned): %w", id, ErrTaskNotFound)
	case t.State == logpb.BroadcastState_BROADCAST_TOMBSTONE:
		return fmt.Errorf("broadcast %d is already finished: %w", id, ErrTaskFinished)
	}
	return nil
}
