package broadcaster

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// ---- executing ---------------------------------------------------------------------

var errTaskFinishedHere = errors.New("task finished (abandoned) meanwhile")

// finished reports whether task id was finished outside its step.
func (ts *termState) finished(id uint64) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.tasks[id]
	return t == nil || t.finishing()
}

// notAssignedError: the FSM does not name a writable owner for a channel.
type notAssignedError struct{ msg string }

func (e *notAssignedError) Error() string { return e.msg }

// step runs one attempt of a task: append to the targets not yet acked,
// then complete it once every target is acked. A FastAck task whose
// appends ack every target left completes in the same command that
// records those acks (CompleteBroadcast with checkpoints), so its last
// acks and its completion share one raft round.
func (ts *termState) step(t *task) outcome {
	log := ts.m.log.With("id", t.id, "message_type", t.msgType)
	st := ts.m.leader.State()
	bt, ok := st.BroadcastTask(t.id)
	if !ok || bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
		return outDone
	}
	ts.mu.Lock()
	t.assignSeen = st.AssignmentVersion()
	ts.mu.Unlock()
	if fsm.AllAcked(bt) {
		return ts.complete(log, t, nil)
	}
	return ts.appendPending(log, t, st, bt)
}

// appendPending appends bt to the targets still to append and records the
// FastAck checkpoints (completing the task with them when they ack every
// target left), and says what the task does next.
func (ts *termState) appendPending(log hclog.Logger, t *task, st *fsm.State, bt *logpb.BroadcastTask) outcome {
	if bt.State == logpb.BroadcastState_BROADCAST_REPLICATED {
		return ts.idle(t, bt) // replicated messages are acked by the nodes
	}
	if targets := ts.toAppend(st, t, bt); len(targets) > 0 {
		cps, onAssign, err := ts.appendAll(st, bt, targets)
		failed := outBackoff
		if onAssign {
			failed = outAssign // the sweep reruns it when the assignment changes
		}
		if len(cps) > 0 {
			ts.madeProgress(t)
			if err == nil && !bt.AckSyncUp && acksAll(bt, cps) {
				return ts.complete(log, t, cps)
			}
			if aerr := ts.recordAppended(t, bt, cps); aerr != nil {
				if ts.ctx.Err() == nil {
					log.Warn("recording broadcast acks failed", "error", aerr)
				}
				return failed
			}
		}
		if err != nil {
			if ts.ctx.Err() == nil {
				log.Warn("broadcast append failed; retrying", "error", err)
			}
			return failed
		}
	}
	bt, ok := ts.m.leader.State().BroadcastTask(t.id)
	if !ok || bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
		return outDone
	}
	if !fsm.AllAcked(bt) {
		if bt.AckSyncUp {
			return ts.idle(t, bt)
		}
		log.Warn("broadcast targets appended but not all acked", "acked", len(bt.Acked), "targets", len(bt.Vchannels))
		return outBackoff
	}
	return ts.complete(log, t, nil)
}

// madeProgress restarts t's backoff from BackoffInitial: a step that
// appended some targets is not stuck, and the ones it missed usually
// failed on a node that has just come back (a restart at the same
// address, a channel's new owner still opening its WAL). Carrying the
// doubled delay of earlier failures over would leave them waiting seconds
// (up to BackoffMax) for a node that answers again within milliseconds.
func (ts *termState) madeProgress(t *task) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t.backoff = 0
}

// recordAppended notes the appended targets of an ack_sync_up task (the
// nodes ack them), or commits the checkpoints as acks (FastAck) when they
// do not ack every target left (some appends failed).
func (ts *termState) recordAppended(t *task, bt *logpb.BroadcastTask, cps []*logpb.VChannelCheckpoint) error {
	if !bt.AckSyncUp {
		return ts.ack(ts.ctx, bt.Id, cps)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t.appended == nil {
		t.appended = map[string]int64{}
	}
	for _, cp := range cps {
		t.appended[cp.Vchannel] = cp.Term
	}
	return nil
}

// complete runs the task's callback and tombstones it, in one command that
// first records cps (the last FastAck checkpoints; nil when every target
// is acked already).
func (ts *termState) complete(log hclog.Logger, t *task, cps []*logpb.VChannelCheckpoint) outcome {
	clock := ts.m.cfg.Clock
	if !t.executionObserved {
		t.executionObserved = true
		ts.m.cfg.Metrics.observeExecution(t.msgType, clock.Since(t.admitted).Seconds())
	}
	start := clock.Now()
	// Once the completion is queued, anything proposed later lands after
	// it in the log: the next conflicting task may propose its create now
	// (handoff.go).
	handOff := commands.OnQueued(func() { ts.handOff(t) })
	res, err := commands.CommitNew(ts.ctx, ts.p, &logpb.CompleteBroadcast{BroadcastId: t.id, Checkpoints: cps}, "", handOff)
	var rej *commands.RejectedError
	switch {
	case errors.As(err, &rej) && rej.Code == logpb.RejectCode_REJECT_NOT_FOUND:
		return outDone
	case errors.As(err, &rej):
		log.Warn("completing broadcast refused", "error", rej.Message)
		return outBackoff
	case err != nil:
		if ts.ctx.Err() == nil {
			log.Warn("completing broadcast failed", "error", err)
		}
		return outBackoff
	}
	c := res.GetCompletion()
	if c.GetTombstoned() {
		ts.m.cfg.Metrics.observeCallback(t.msgType, clock.Since(start).Seconds())
		return outDone
	}
	ts.m.cfg.Metrics.callbackFailed(t.msgType)
	log.Warn("broadcast ack callback refused; retrying", "error", c.GetCallbackError())
	return outBackoff
}

// idle parks a task until its remaining acks arrive.
func (ts *termState) idle(t *task, bt *logpb.BroadcastTask) outcome {
	ts.mu.Lock()
	t.ackedSeen = len(bt.Acked)
	ts.mu.Unlock()
	return outIdle
}

// toAppend lists the targets still to append: every unacked target, minus
// (for ack_sync_up tasks) the ones already appended in this leadership at
// their PChannel's current term in st.
func (ts *termState) toAppend(st *fsm.State, t *task, bt *logpb.BroadcastTask) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for _, v := range bt.Vchannels {
		if _, ok := fsm.Acked(bt, v); ok {
			continue
		}
		if term, ok := t.appended[v]; bt.AckSyncUp && ok {
			if p, found := st.PChannel(vocab.PChannelOf(v)); found && p.Term == term {
				continue
			}
		}
		out = append(out, v)
	}
	return out
}

// ack commits FastAck checkpoints in one command.
func (ts *termState) ack(ctx context.Context, id uint64, cps []*logpb.VChannelCheckpoint) error {
	_, err := commands.CommitNew(ctx, ts.p, &logpb.AckBroadcast{BroadcastId: id, Checkpoints: cps}, "")
	return err
}

// acksAll reports whether cps ack every target of bt not acked yet.
func acksAll(bt *logpb.BroadcastTask, cps []*logpb.VChannelCheckpoint) bool {
	in := make(map[string]bool, len(cps))
	for _, cp := range cps {
		in[cp.Vchannel] = true
	}
	for _, v := range bt.Vchannels {
		if _, ok := fsm.Acked(bt, v); !ok && !in[v] {
			return false
		}
	}
	return true
}
