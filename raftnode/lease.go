package raftnode

import (
	"sync"
	"time"
)

// leaderLease lets an established leader confirm its leadership from its
// own clock instead of a quorum round (docs/architecture.md#leader-lease).
//
// The argument, for hashicorp/raft v1.8: a follower refuses every vote and
// pre-vote while it knows a leader, and forgets its leader only once
// HeartbeatTimeout has passed since it last heard from it. An entry the
// leader submitted at time a cannot travel in an AppendEntries sent
// before a, so when it commits, a quorum heard from the leader after a and
// none of them votes for anybody before a + HeartbeatTimeout. Every future
// leader needs a vote from that quorum, so none is elected before then. The
// lease runs to a + d, with d below HeartbeatTimeout for clock-rate drift.
//
// What breaks the argument, and what the lease does about it:
//   - a leadership transfer: the target's election bypasses the refusal, so
//     the first transfer attempt ends the lease for the rest of the term,
//     and its TimeoutNow is accepted only in that term, from that leader
//     (transfer_guard.go), so a late one cannot elect anybody in a later
//     term's lease;
//   - a membership change: a new configuration has other quorums, so the
//     lease pauses while one is in progress and counts only entries
//     submitted after it completed (a failed change ends it for the term);
//   - a member that restarts forgets its leader at once: Open waits d before
//     starting raft, so every lease its previous run upheld has run out;
//   - a member that stops leading may vote at once: the lease is used only
//     while raft reports this member as leader of the established term.
//
// Every member must run the same HeartbeatTimeout (the lease trusts the
// followers' timers to be at least as long as its own). Time is read from
// leaseClock (CLOCK_BOOTTIME on Linux), which counts a system suspend, so
// a leader resumed from one finds its lease over.
type leaderLease struct {
	d time.Duration // 0: off
	// clock gives the instants below (leaseClock: it counts suspend).
	clock func() time.Duration

	mu       sync.Mutex
	term     uint64        // the term until belongs to
	until    time.Duration // valid while now < until
	ended    uint64        // a term whose lease was ended for good (transfer, failed change)
	changing int           // membership changes in progress
	resumeAt time.Duration // entries submitted before this instant do not count
	renewing bool          // a renewal barrier is in flight
}

func newLeaderLease(d time.Duration) *leaderLease {
	return &leaderLease{d: d, clock: leaseClock}
}

func (l *leaderLease) enabled() bool { return l != nil && l.d > 0 }

// now is the current instant on the lease's clock (0 when it is off).
func (l *leaderLease) now() time.Duration {
	if !l.enabled() {
		return 0
	}
	return l.clock()
}

// extend records that an entry submitted at instant at in term committed.
func (l *leaderLease) extend(term uint64, at time.Duration) {
	if !l.enabled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if term == 0 || term == l.ended || l.changing > 0 || at < l.resumeAt {
		return
	}
	if term != l.term {
		l.term, l.until = term, 0
	}
	l.until = max(l.until, at+l.d)
}

// remaining is how long the lease of term still runs at now (<= 0: none).
func (l *leaderLease) remaining(term uint64, now time.Duration) time.Duration {
	if !l.enabled() {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if term == 0 || term != l.term || term == l.ended || l.changing > 0 {
		return 0
	}
	return l.until - now
}

// end revokes the lease of term for the rest of the term.
func (l *leaderLease) end(term uint64) {
	if !l.enabled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = term
	if l.term == term {
		l.until = 0
	}
}

// pause revokes the lease while a membership change runs; resume ends the
// pause: after a completed change only entries submitted from now on count,
// after a failed one (it may still commit later) the lease ends for term.
func (l *leaderLease) pause() {
	if !l.enabled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changing++
	l.until = 0
}

func (l *leaderLease) resume(term uint64, ok bool, now time.Duration) {
	if !l.enabled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changing--
	l.resumeAt = max(l.resumeAt, now)
	if !ok {
		l.ended = term
	}
}

// check is remaining and startRenewal in one lock acquisition, for
// VerifyLeader (once per allocation and lease read): how long the lease of
// term still runs at now, and whether the caller should renew it (then it
// must call renewalDone).
func (l *leaderLease) check(term uint64, now time.Duration) (left time.Duration, renew bool) {
	if !l.enabled() {
		return 0, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if term == 0 || term == l.ended || l.changing > 0 {
		return 0, false
	}
	if term == l.term {
		left = l.until - now
	}
	if !l.renewing && (term != l.term || l.until-now <= l.d/2) {
		l.renewing, renew = true, true
	}
	return left, renew
}

// startRenewal reports whether the caller should renew the lease now: it
// runs out within half its length (or there is none for term) and no
// renewal is in flight. The caller must call renewalDone.
func (l *leaderLease) startRenewal(term uint64, now time.Duration) bool {
	_, renew := l.check(term, now)
	return renew
}

func (l *leaderLease) renewalDone() {
	l.mu.Lock()
	l.renewing = false
	l.mu.Unlock()
}
