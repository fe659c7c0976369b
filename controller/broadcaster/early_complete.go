package broadcaster

import (
	"sync"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// earlyCompletion proposes a task's CompleteBroadcast right behind the
// FastAck that acks its last targets, instead of a raft round after it.
// The proposal queue is FIFO and the log keeps its order
// (commands.WithQueued), so CompleteBroadcast is applied after the ack;
// Apply completes the task only if every target is acked by then, so a
// refused ack makes the completion a harmless refusal ("n of m targets
// acked") and the task backs off as before. A broadcast then costs two
// raft rounds (create; ack and complete) instead of three.
type earlyCompletion struct {
	once    sync.Once
	started bool
	done    chan outcome
}

// start runs complete in the background, once.
func (e *earlyCompletion) start(complete func() outcome) {
	e.once.Do(func() {
		e.started = true
		e.done = make(chan outcome, 1)
		go func() { e.done <- complete() }()
	})
}

// wait returns the completion's outcome when it was started. The step
// that started it waits for it whatever the step's own result, so the
// task is never completed behind its worker's back.
func (e *earlyCompletion) wait() (outcome, bool) {
	var started bool
	e.once.Do(func() {}) // no start after this point
	started = e.started
	if !started {
		return 0, false
	}
	return <-e.done, true
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
