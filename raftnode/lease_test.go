package raftnode

import (
	"testing"
	"time"
)

// TestLeaderLeaseRules: what extends, pauses and ends the lease
// (leaderLease's comment gives the reasons).
func TestLeaderLeaseRules(t *testing.T) {
	const d = 100 * time.Millisecond
	at := func(_ *leaderLease, ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
	cases := []struct {
		name string
		run  func(l *leaderLease)
		term uint64 // asked about
		now  int    // ms
		want time.Duration
	}{
		{"off", func(l *leaderLease) { l.d = 0; l.extend(2, at(l, 0)) }, 2, 10, 0},
		{"none before a commit", func(l *leaderLease) {}, 2, 10, 0},
		{"a commit anchors it at submission", func(l *leaderLease) { l.extend(2, at(l, 50)) }, 2, 60, 90 * time.Millisecond},
		{"ends d after the anchor", func(l *leaderLease) { l.extend(2, at(l, 50)) }, 2, 150, 0},
		{"an older anchor never shortens it", func(l *leaderLease) { l.extend(2, at(l, 50)); l.extend(2, at(l, 10)) }, 2, 60, 90 * time.Millisecond},
		{"another term's lease does not count", func(l *leaderLease) { l.extend(2, at(l, 50)) }, 3, 60, 0},
		{"a new term starts afresh", func(l *leaderLease) { l.extend(2, at(l, 50)); l.extend(3, at(l, 20)) }, 3, 60, 60 * time.Millisecond},
		{"no term, no lease", func(l *leaderLease) { l.extend(0, at(l, 50)) }, 0, 60, 0},
		{"a transfer ends it for the term", func(l *leaderLease) { l.extend(2, at(l, 50)); l.end(2); l.extend(2, at(l, 55)) }, 2, 60, 0},
		{"paused during a membership change", func(l *leaderLease) { l.extend(2, at(l, 50)); l.pause(); l.extend(2, at(l, 55)) }, 2, 60, 0},
		{"after a change only later entries count", func(l *leaderLease) {
			l.extend(2, at(l, 10))
			l.pause()
			l.resume(2, true, at(l, 30))
			l.extend(2, at(l, 20)) // submitted during the change
		}, 2, 40, 0},
		{"after a change a later entry renews it", func(l *leaderLease) {
			l.pause()
			l.resume(2, true, at(l, 30))
			l.extend(2, at(l, 35))
		}, 2, 40, 95 * time.Millisecond},
		{"a failed change ends it for the term", func(l *leaderLease) {
			l.pause()
			l.resume(2, false, at(l, 30))
			l.extend(2, at(l, 35))
		}, 2, 40, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLeaderLease(d)
			tc.run(l)
			got := max(l.remaining(tc.term, at(l, tc.now)), 0)
			if got != tc.want {
				t.Fatalf("remaining = %v, want %v", got, tc.want)
			}
			// check (VerifyLeader's one lock round) answers the same.
			l = newLeaderLease(d)
			tc.run(l)
			if left, _ := l.check(tc.term, at(l, tc.now)); max(left, 0) != tc.want {
				t.Fatalf("check = %v, want %v", left, tc.want)
			}
		})
	}
}

// TestLeaseRenewalIsSingleFlight: a renewal starts once the lease is in
// its second half (or absent), never twice at once, and not for a term
// whose lease ended.
func TestLeaseRenewalIsSingleFlight(t *testing.T) {
	l := newLeaderLease(100 * time.Millisecond)
	at := func(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
	if !l.startRenewal(2, at(0)) {
		t.Fatal("no lease yet: a renewal should start")
	}
	if l.startRenewal(2, at(1)) {
		t.Fatal("a second renewal started while one is in flight")
	}
	l.renewalDone()
	l.extend(2, at(10))
	if l.startRenewal(2, at(40)) {
		t.Fatal("renewal started with more than half the lease left")
	}
	if !l.startRenewal(2, at(70)) {
		t.Fatal("renewal did not start in the lease's second half")
	}
	l.renewalDone()
	l.end(2)
	if l.startRenewal(2, at(80)) {
		t.Fatal("renewal started for a term whose lease ended")
	}
}
