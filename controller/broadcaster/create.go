package broadcaster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
)

// ---- creating ---------------------------------------------------------------------

// create commits the task under guard and hands both to the scheduler. The
// proposal runs on the leadership's context, not the caller's: when the
// caller gives up, the outcome is still learnt and the guard either goes to
// the task or is released, so no committed task is ever left unlocked.
//
// A body ordered behind predecessors (after_broadcasts) that Apply refused
// with REJECT_ORDER changed nothing: create waits, within lockCtx, until
// they have finished and proposes the same request again.
//
// settled is called once the proposal's outcome is known (or it was never
// made), even when the caller has given up by then.
func (ts *termState) create(ctx, lockCtx context.Context, cmd commands.Command, guard *lockGuard, settled func()) (uint64, bool, error) {
	type out struct {
		id  uint64
		dup bool
		err error
	}
	ordered := len(cmd.Body.(*logpb.CreateBroadcast).AfterBroadcasts) > 0
	ch := make(chan out, 1)
	ts.mu.Lock()
	if ts.stopped {
		ts.mu.Unlock()
		guard.release()
		settled()
		return 0, false, errNotLeader
	}
	ts.wg.Add(1) // never concurrent with stop's Wait: stop sets stopped first
	ts.mu.Unlock()
	go func() {
		defer ts.wg.Done()
		defer settled()
		if err := ctx.Err(); err != nil {
			guard.release()
			ch <- out{err: err}
			return
		}
		started := time.Now()
		var chained []commands.Option
		if ordered {
			// Queued right behind the completion it follows: let it go out
			// while that completion is in flight (commands.Chained).
			chained = append(chained, commands.Chained())
		}
		res, err := ts.m.proposeRetrying(ts.ctx, ts.p, cmd, chained...)
		for attempt := 1; ordered && isOrderRefusal(err); attempt++ {
			ts.m.cfg.Metrics.createReordered()
			behind := guard.pending()
			if len(behind) == 0 && attempt > 1 {
				break // refused although every predecessor finished: report it
			}
			if werr := ts.awaitPredecessors(lockCtx, behind, started); werr != nil {
				err = werr
				break
			}
			res, err = ts.m.proposeRetrying(ts.ctx, ts.p, cmd)
		}
		var rej *commands.RejectedError
		switch {
		case errors.As(err, &rej):
			guard.release()
			ch <- out{err: err}
		case err != nil:
			guard.release()
			switch {
			case errors.Is(err, leadership.ErrOutcomeUnknown):
				// The task may exist: never "not the leader" (nothing
				// done), whatever ended the leadership meanwhile.
				if ts.ctx.Err() != nil {
					err = fmt.Errorf("leadership ended while creating the task: %w", err)
				}
			case ts.ctx.Err() != nil && !errors.Is(err, errNotLeader):
				err = fmt.Errorf("%w (leadership ended while creating the task: %w)", errNotLeader, err)
			}
			ch <- out{err: err}
		default:
			c := res.GetBroadcast()
			if c == nil {
				guard.release()
				ch <- out{err: fmt.Errorf("broadcaster: unexpected CreateBroadcast result %v", res)}
				return
			}
			dup := c.Duplicated
			if dup {
				guard.release()
			} else if bt, ok := ts.m.leader.State().BroadcastTask(c.BroadcastId); !ok {
				guard.release() // pruned already (a very late repeat of a request ID)
				dup = true
			} else if bt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
				guard.release() // finished already (a late repeat of a request ID)
				dup = true
			} else if !ts.adopt(bt, guard) {
				dup = true
			}
			ch <- out{id: c.BroadcastId, dup: dup}
		}
	}()
	select {
	case o := <-ch:
		return o.id, o.dup, o.err
	case <-ctx.Done():
		// The proposal goes on without the caller: it may commit.
		return 0, false, fmt.Errorf("%w: the caller gave up while the task was being created: %w",
			leadership.ErrOutcomeUnknown, ctx.Err())
	}
}

// isOrderRefusal reports a create refused because a task it was ordered
// behind had not finished (REJECT_ORDER).
func isOrderRefusal(err error) bool {
	var rej *commands.RejectedError
	return errors.As(err, &rej) && rej.Code == logpb.RejectCode_REJECT_ORDER
}
