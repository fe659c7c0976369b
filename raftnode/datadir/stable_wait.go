package datadir

import (
	"runtime"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A write of the term or the vote that fails (a full disk, an I/O error) is
// retried, holding raft's calling goroutine, until it is durable; it never
// returns an error to raft. Why (docs/operations.md#full-disk):
//
//   - hashicorp/raft panics when it cannot store its current term
//     (setCurrentTerm), and the panic kills the process with a stack trace;
//     restarted on the same full disk, the member panics again at its next
//     election. Returning an error is not an option for the term.
//   - Returning nil without the write is never an option either: raft would
//     act on a term or a vote that a crash can take back, and a member that
//     forgets a vote can vote twice in one term.
//   - Waiting is safe and takes the member out of the cluster: raft calls
//     the stable store from its main goroutine (and from the transport's
//     heartbeat path), so while one write waits the member answers no RPC,
//     grants no vote and starts no election; the others time it out and
//     elect a leader among themselves. Before each such write raft has
//     already left the leader state (a newer term makes it a follower), so
//     the member is never a leader that stopped answering. Readiness
//     reports the fault, and the first write that succeeds after space
//     returns lets raft go on where it stopped: recovery needs nobody.
//
// The votes wait too, although raft would survive an error there (it
// refuses the vote): a vote failure that returned would leave the fault
// with nothing to retry it, so the member would stay "not ready" after the
// space came back, until the next election.
//
// Shutdown ends the wait (stopWaiting). The write is still not durable, so
// returning to raft is as wrong then as before, nil or error: the waiting
// goroutine exits instead (runtime.Goexit). Its deferred calls still run —
// raft's RPC handlers answer the request with the refusal they had
// prepared (the older term, no vote granted, no entries accepted), and
// raft's goroutine counter is released, so raft.Shutdown returns and the
// process ends with one log line naming the write it never made.
//
// One write at a time, in the order raft asked (turn): raft stores terms
// from two goroutines (its main loop and the transport's heartbeat path,
// one per connection a leader opened while this member did not answer),
// and while the disk is full each waits with its own term. Served in
// arrival order — the order raft raised its term in — they complete in
// that order when space returns, rather than by whichever timer fires
// first, which could store a newer term and then an older one over it.
// storeTerm also never lowers the term raft.db holds.

// Backoff between retries of a failed term or vote write.
const (
	stableRetryFirst = 10 * time.Millisecond
	stableRetryMax   = time.Second
)

// stableWait retries failed term and vote writes (see above).
type stableWait struct {
	// after is the retry timer: time.After; tests inject a clock.
	after  func(time.Duration) <-chan time.Time
	now    func() time.Time
	logger hclog.Logger

	quit     chan struct{} // closed by stopWaiting
	quitOnce sync.Once
	// turn is held by the one write in progress; blocked senders on a
	// channel are served first come, first served.
	turn chan struct{}

	fault WriteFault
	// waiting counts the writes waiting right now (Shutdown skips its
	// settle wait while one does: raft answers nothing meanwhile).
	mu      sync.Mutex
	waiting int
}

func newStableWait() stableWait {
	return stableWait{after: time.After, now: time.Now, logger: hclog.NewNullLogger(),
		quit: make(chan struct{}), turn: make(chan struct{}, 1)}
}

// until makes write durable: it calls write until it succeeds, waiting with
// backoff between attempts, and returns only then. what names the value for
// the log. When stopWaiting is called first, the calling goroutine exits
// without returning (see above).
func (w *stableWait) until(what string, write func() error) {
	w.setWaiting(1)
	defer w.setWaiting(-1)
	select {
	case w.turn <- struct{}{}:
	default:
		select {
		case w.turn <- struct{}{}:
		case <-w.quit:
			// Queued behind the write that holds the turn, which logs
			// the one line: a member with a full disk had one waiter per
			// leader connection, and a line each says nothing more.
			runtime.Goexit()
		}
	}
	defer func() { <-w.turn }()
	err := write()
	if began, _ := w.fault.Record(err, w.now()); began {
		w.logger.Error("cannot store its "+what+"; it takes no part in elections or replication until it can, retrying",
			"error", err, "disk_full", IsDiskFull(err))
	}
	if err == nil {
		return
	}
	start := w.now()
	delay := stableRetryFirst
	for attempt := 1; ; attempt++ {
		select {
		case <-w.quit:
			w.logger.Error("shutting down with its "+what+" not stored: nothing that needed it was acknowledged",
				"error", err, "failing_for", w.now().Sub(start).Round(time.Millisecond))
			runtime.Goexit()
		case <-w.after(delay):
		}
		err = write()
		if _, ended := w.fault.Record(err, w.now()); ended {
			w.logger.Info("stored its "+what+" after failing; it takes part again",
				"failing_for", w.now().Sub(start).Round(time.Millisecond), "attempts", attempt+1)
		}
		if err == nil {
			return
		}
		if attempt%100 == 0 {
			w.logger.Error("still cannot store its "+what, "error", err, "disk_full", IsDiskFull(err), "attempts", attempt+1)
		}
		delay = min(2*delay, stableRetryMax)
	}
}

func (w *stableWait) setWaiting(d int) {
	w.mu.Lock()
	w.waiting += d
	w.mu.Unlock()
}

// blocked says whether a term or vote write is in progress or waiting.
func (w *stableWait) blocked() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting > 0
}

// stopWaiting ends every wait, now and later (Shutdown).
func (w *stableWait) stopWaiting() {
	w.quitOnce.Do(func() { close(w.quit) })
}
