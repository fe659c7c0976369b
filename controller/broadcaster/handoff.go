package broadcaster

import (
	"context"
	"fmt"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// ---- handing keys on at completion ------------------------------------------------
//
// A task holds its resource keys until it is a TOMBSTONE, and its
// completion (CompleteBroadcast) takes a raft round. Waiting for that
// round before the next conflicting Broadcast may even propose its
// CreateBroadcast would cost every task on a hot key two rounds of its
// own. Instead, once the completion is queued for the log, the task hands
// its keys on: the lock table grants them to the next waiters as if they
// were released, but remembers the task as finishing on each key until it
// really finishes (lockGuard.release). A waiter granted a key a finishing
// task held in a conflicting mode is ordered behind it: its create names
// the task in after_broadcasts, and Apply decides the create only once
// that task is a TOMBSTONE, refusing it with REJECT_ORDER before. The raft
// log orders the create after the completion it follows, so the refusal
// is rare (a completion that was itself refused); the create is then
// proposed again once the predecessors have finished. Correctness rests on
// Apply, not on this bookkeeping: appends, callbacks and IDs keep the
// order of conflicting tasks (docs/semantics.md#resource-keys).

// finishingTask is a task that handed its keys on and has not finished.
type finishingTask struct {
	id   uint64
	done chan struct{} // closed when the task finishes
}

// finishingHold is a finishing task's former hold on one key.
type finishingHold struct {
	task   *finishingTask
	shared bool
}

// predecessor is a conflicting task that was finishing on a key when the
// key was granted.
type predecessor struct {
	task uint64
	key  string // the key's KeyName, for errors
	done <-chan struct{}
}

// conflictingFinishing lists the finishing tasks that conflict with a
// hold in the given mode: all of them, unless both are shared.
func (kl *keyLock) conflictingFinishing(shared bool) []predecessor {
	var out []predecessor
	for _, f := range kl.finishing {
		if shared && f.shared {
			continue
		}
		out = append(out, predecessor{task: f.task.id, done: f.task.done})
	}
	return out
}

// named sets the key name of predecessors found on k.
func named(ps []predecessor, k *logpb.ResourceKey) []predecessor {
	for i := range ps {
		ps[i].key = KeyName(k)
	}
	return ps
}

// handOff gives the guard's keys on early for task id, whose completion
// has just been queued for the log: every key is released to its waiters
// and task id stays on it as finishing until release. It does nothing on
// a guard released or handed off already, or once the table closed.
func (g *lockGuard) handOff(id uint64) {
	if g == nil {
		return
	}
	lt := g.lt
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if g.released || g.handedOff != nil || lt.closed {
		return
	}
	f := &finishingTask{id: id, done: make(chan struct{})}
	g.handedOff = f
	for i := g.held - 1; i >= 0; i-- {
		k := g.keys[i]
		kid := commands.ResourceKeyID(k)
		if kl := lt.keys[kid]; kl != nil {
			kl.finishing = append(kl.finishing, finishingHold{task: f, shared: k.Shared})
		}
		lt.releaseLocked(kid, k.Shared)
	}
}

// forgetFinishingLocked drops f from keys once it has finished.
func (lt *lockTable) forgetFinishingLocked(keys []*logpb.ResourceKey, f *finishingTask) {
	if lt.closed {
		return
	}
	for _, k := range keys {
		kid := commands.ResourceKeyID(k)
		kl := lt.keys[kid]
		if kl == nil {
			continue
		}
		for i, h := range kl.finishing {
			if h.task == f {
				kl.finishing = append(kl.finishing[:i:i], kl.finishing[i+1:]...)
				break
			}
		}
		if kl.idle() {
			delete(lt.keys, kid)
		}
	}
}

// addBehind records the predecessors found on one more key (a task
// finishing on several keys is listed once).
func (g *lockGuard) addBehind(ps []predecessor) {
next:
	for _, p := range ps {
		for _, q := range g.behind {
			if q.task == p.task {
				continue next
			}
		}
		g.behind = append(g.behind, p)
	}
}

// pending returns the predecessors that have not finished yet.
func (g *lockGuard) pending() []predecessor {
	var out []predecessor
	for _, p := range g.behind {
		select {
		case <-p.done:
		default:
			out = append(out, p)
		}
	}
	return out
}

// predecessorIDs lists the tasks of ps, for CreateBroadcast.after_broadcasts.
func predecessorIDs(ps []predecessor) []uint64 {
	ids := make([]uint64, len(ps))
	for i, p := range ps {
		ids[i] = p.task
	}
	return ids
}

// pipelinable reports whether a create for req may be proposed while ps
// are still finishing: only when its body does not depend on what their
// callbacks do to the state. Targets the broadcaster chooses do (a
// DropCollection goes to the VChannels a CreateCollection's callback
// records); every guard Apply runs is decided on the right state anyway.
func pipelinable(req Request, ps []predecessor) bool {
	return len(req.VChannels) > 0 && len(ps) <= commands.MaxBroadcastPredecessors
}

// awaitPredecessors waits until every task of ps has finished. A wait the
// caller's ctx or the leadership ends returns a *LockTimeoutError naming
// the key of the task still finishing, or errNotLeader.
func (ts *termState) awaitPredecessors(ctx context.Context, ps []predecessor, started time.Time) error {
	ts.m.awaitingPredecessors.Add(1)
	defer ts.m.awaitingPredecessors.Add(-1)
	for _, p := range ps {
		select {
		case <-p.done:
		case <-ts.ctx.Done():
			return errNotLeader
		case <-ctx.Done():
			return &LockTimeoutError{Key: p.key, Waited: time.Since(started),
				Err: fmt.Errorf("broadcast %d, which held the key, is still finishing: %w", p.task, ctx.Err())}
		}
	}
	return nil
}

// handOff hands t's keys on (see lockGuard.handOff); called when its
// completion is queued for the log.
func (ts *termState) handOff(t *task) {
	ts.mu.Lock()
	g := t.guard
	ts.mu.Unlock()
	g.handOff(t.id)
}
