package datadir

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// diskFullErr is what a write on a full file system returns.
var diskFullErr = &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}

// waitingStable is a recordingStable over an in-memory store behind a
// failure switch, with a retry clock the test drives: every retry wait is
// handed to timers, and the retry happens when the test fires it.
func waitingStable(t *testing.T) (s *recordingStable, inner *raft.InmemStore, sw *switchedStable, timers chan chan time.Time) {
	t.Helper()
	inner = raft.NewInmemStore()
	sw = &switchedStable{StableStore: inner}
	s = newRecordingStable(sw, t.TempDir(), voteRecord{})
	timers = make(chan chan time.Time)
	s.wait.after = func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		timers <- c
		return c
	}
	return s, inner, sw, timers
}

// nextTimer is the retry wait the writer is in now, or fails the test if
// the write returned instead.
func nextTimer(t *testing.T, timers chan chan time.Time, returned chan error) chan time.Time {
	t.Helper()
	select {
	case c := <-timers:
		return c
	case err := <-returned:
		t.Fatalf("the write returned (%v) while the store still failed: raft would act on a term or vote that is not durable", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the write neither waited nor returned")
	}
	return nil
}

// TestTermWriteWaitsUntilDurable: a current-term write that fails with
// ENOSPC does not return to raft (whose setCurrentTerm panics on an error)
// and is not acknowledged: it waits, retrying on the injected clock, while
// the member reports "disk full", and returns nil once raft.db and
// VoteFile both hold the term.
func TestTermWriteWaitsUntilDurable(t *testing.T) {
	s, inner, sw, timers := waitingStable(t)
	sw.set(diskFullErr)
	returned := make(chan error, 1)
	go func() { returned <- s.SetUint64(keyCurrentTerm, 7) }()
	for range 3 {
		c := nextTimer(t, timers, returned)
		f, ok := s.wait.fault.Fault(WriteTermVote)
		if !ok || !f.DiskFull || !errors.Is(f, syscall.ENOSPC) {
			t.Fatalf("while waiting: fault %v, %v; want a disk-full term-and-vote fault", f, ok)
		}
		if term, _ := inner.GetUint64(keyCurrentTerm); term == 7 {
			t.Fatal("the failing store holds the term")
		}
		if rec, _, _ := loadVoteRecord(s.dir); rec.CurrentTerm == 7 {
			t.Fatalf("%s records a term raft.db does not hold", VoteFile)
		}
		c <- time.Time{}
	}
	sw.set(nil)
	for done := false; !done; {
		select {
		case c := <-timers:
			c <- time.Time{}
		case err := <-returned:
			if err != nil {
				t.Fatalf("SetUint64 returned %v: raft panics on that", err)
			}
			done = true
		}
	}
	if term, _ := inner.GetUint64(keyCurrentTerm); term != 7 {
		t.Fatalf("raft.db holds term %d, want 7", term)
	}
	if rec, ok, err := loadVoteRecord(s.dir); err != nil || !ok || rec.CurrentTerm != 7 {
		t.Fatalf("%s: %+v %v %v, want term 7", VoteFile, rec, ok, err)
	}
	if f, ok := s.wait.fault.Fault(WriteTermVote); ok {
		t.Fatalf("fault %v after the write succeeded", f)
	}
}

// TestVoteNotAcknowledgedBeforeVoteFileHoldsIt: raft.db stores the vote
// but VoteFile cannot be written (its temporary file finds no space): the
// vote is not durable in the sense the start-up check relies on, so the
// write does not return (raft grants no vote) until both hold it.
func TestVoteNotAcknowledgedBeforeVoteFileHoldsIt(t *testing.T) {
	s, inner, _, timers := waitingStable(t)
	if err := s.SetUint64(keyCurrentTerm, 3); err != nil {
		t.Fatal(err)
	}
	var fileFull error = &os.PathError{Op: "write", Path: VoteFile + ".tmp", Err: syscall.ENOSPC}
	failing := make(chan bool, 1)
	failing <- true
	s.writeRecord = func(dir string, rec voteRecord) error {
		f := <-failing
		failing <- f
		if f {
			return fileFull
		}
		return writeVoteRecord(dir, rec)
	}
	if err := s.SetUint64(keyLastVoteTerm, 3); err != nil {
		t.Fatal(err)
	}
	returned := make(chan error, 1)
	go func() { returned <- s.Set(keyLastVoteCand, []byte("n2")) }()
	c := nextTimer(t, timers, returned)
	if cand, _ := inner.Get(keyLastVoteCand); string(cand) != "n2" {
		t.Fatalf("raft.db holds candidate %q", cand)
	}
	if rec, _, _ := loadVoteRecord(s.dir); rec.LastVoteCand != "" {
		t.Fatalf("%s records a vote it could not write: %+v", VoteFile, rec)
	}
	<-failing
	failing <- false
	c <- time.Time{}
	if err := <-returned; err != nil {
		t.Fatalf("Set returned %v", err)
	}
	if rec, _, _ := loadVoteRecord(s.dir); rec.LastVoteTerm != 3 || rec.LastVoteCand != "n2" {
		t.Fatalf("%s: %+v, want the vote for n2 in term 3", VoteFile, rec)
	}
}

// TestShutdownEndsTermWait: Shutdown stops a waiting term write without
// returning it to raft (neither nil, which would acknowledge a term that
// is not durable, nor an error, on which raft panics): the goroutine
// exits, running its deferred calls, so raft.Shutdown's wait ends.
func TestShutdownEndsTermWait(t *testing.T) {
	s, _, sw, timers := waitingStable(t)
	sw.set(diskFullErr)
	exited, returned := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(exited)
		returned <- s.SetUint64(keyCurrentTerm, 9)
	}()
	nextTimer(t, timers, returned)
	if !s.wait.blocked() {
		t.Fatal("a waiting write is not reported as blocked")
	}
	s.wait.stopWaiting()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting write did not end on shutdown")
	}
	select {
	case err := <-returned:
		t.Fatalf("the write returned %v to raft on shutdown", err)
	default:
	}
	if s.wait.blocked() {
		t.Fatal("still reported as blocked after the wait ended")
	}
}

// TestTermWritesKeepOrderAndNeverGoBack: two term writes waiting at once
// (raft's main loop and its heartbeat path, each with its own term) finish
// in the order raft asked when space returns, and a term older than the
// stored one is never written over it.
func TestTermWritesKeepOrderAndNeverGoBack(t *testing.T) {
	s, inner, sw, timers := waitingStable(t)
	sw.set(diskFullErr)
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- s.SetUint64(keyCurrentTerm, 3) }()
	c := nextTimer(t, timers, first)
	go func() { second <- s.SetUint64(keyCurrentTerm, 5) }()
	deadline := time.Now().Add(10 * time.Second)
	for waiting := 0; waiting < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the second write never queued")
		}
		s.wait.mu.Lock()
		waiting = s.wait.waiting
		s.wait.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	select {
	case <-timers:
		t.Fatal("the second write retried while the first held its turn")
	default:
	}
	sw.set(nil)
	c <- time.Time{}
	for _, ch := range []chan error{first, second} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a term write did not finish once the store worked")
		}
	}
	if term, _ := inner.GetUint64(keyCurrentTerm); term != 5 {
		t.Fatalf("raft.db holds term %d after writes of 3 then 5", term)
	}
	if err := s.SetUint64(keyCurrentTerm, 4); err != nil {
		t.Fatal(err)
	}
	if term, _ := inner.GetUint64(keyCurrentTerm); term != 5 {
		t.Fatalf("a late write of term 4 took raft.db from 5 to %d", term)
	}
	if rec, _, _ := loadVoteRecord(s.dir); rec.CurrentTerm != 5 {
		t.Fatalf("%s records term %d, want 5", VoteFile, rec.CurrentTerm)
	}
}
