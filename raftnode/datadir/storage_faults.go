package datadir

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// A member tracks three kinds of durable write it must make, each in the
// wrapper raft writes through: its term and vote (recordingStable), its log
// (watchedLogStore) and its snapshots (cleaningSnapshotStore). A kind that
// keeps failing is a StorageFault until one write of that kind succeeds
// again: /readyz answers 503 with it, the metrics and the status page say
// whether the disk is full (docs/operations.md#full-disk).

// Kinds of durable write, in the order Readiness reports them: the first
// is the one that takes the member out of the cluster.
const (
	WriteTermVote = "term and vote"
	WriteLog      = "raft log"
	WriteSnapshot = "snapshot"
)

// StorageFault is a kind of durable write this member keeps failing to make.
type StorageFault struct {
	Write    string    // WriteTermVote, WriteLog or WriteSnapshot
	Err      error     // the last failure
	Since    time.Time // when the failures began
	DiskFull bool      // the file system has no space (or quota) left
}

func (f StorageFault) Error() string {
	var what string
	switch f.Write {
	case WriteTermVote:
		what = "cannot store its term and vote (it takes no part in elections or replication until it can)"
	case WriteLog:
		what = "cannot append to its raft log"
	default:
		what = "cannot write a snapshot"
	}
	if f.DiskFull {
		what = "disk full: " + what
	}
	return fmt.Sprintf("%s: %v", what, f.Err)
}

func (f StorageFault) Unwrap() error { return f.Err }

// IsDiskFull says whether err is the file system refusing space: no
// space left (ENOSPC) or the quota used up (EDQUOT).
func IsDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// WriteFault remembers whether one kind of durable write is failing.
type WriteFault struct {
	mu    sync.Mutex
	err   error
	since time.Time
}

// record notes the outcome of one write (now: when it ended) and says
// whether it began (began) or ended (ended) a run of failures.
func (f *WriteFault) Record(err error, now time.Time) (began, ended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err == nil:
		ended = f.err != nil
		f.err, f.since = nil, time.Time{}
	case f.err == nil:
		began = true
		f.err, f.since = err, now
	default:
		f.err = err
	}
	return began, ended
}

// fault is the current run of failures as a StorageFault (ok false: none).
func (f *WriteFault) Fault(write string) (StorageFault, bool) {
	if f == nil {
		return StorageFault{}, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		return StorageFault{}, false
	}
	return StorageFault{Write: write, Err: f.err, Since: f.since, DiskFull: IsDiskFull(f.err)}, true
}

// stableFault is the term-and-vote writes' fault (nil: none tracked).
func (s *Storage) StableFault() *WriteFault {
	if s == nil || s.stable == nil {
		return nil
	}
	return &s.stable.wait.fault
}

// snapshotFault is the snapshot writes' fault (nil: none tracked).
func (s *Storage) SnapshotFault() *WriteFault {
	if s == nil || s.snaps == nil {
		return nil
	}
	if c, ok := s.snaps.SnapshotStore.(*cleaningSnapshotStore); ok {
		return &c.fault
	}
	return nil
}
