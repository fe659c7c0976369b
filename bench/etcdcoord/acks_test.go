package main

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// recordingSave records each save's acks; the first save blocks until
// release is closed.
type recordingSave struct {
	mu      sync.Mutex
	saves   [][]*coordpb.Checkpoint
	release chan struct{}
	fail    error
}

func (r *recordingSave) save(acked []*coordpb.Checkpoint) error {
	r.mu.Lock()
	first := len(r.saves) == 0
	r.saves = append(r.saves, acked)
	r.mu.Unlock()
	if first && r.release != nil {
		<-r.release
	}
	return r.fail
}

func ackAll(l *ackLog, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.ack(&coordpb.Checkpoint{Vchannel: fmt.Sprintf("ch%d", i)})
		}()
	}
	wg.Wait()
	return errs
}

// waitPending waits until n acks are recorded in l.
func waitPending(t *testing.T, l *ackLog, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(l.all()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acks arrived", len(l.all()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Acks that arrive while a save is in flight are saved together by the
// next one: 16 concurrent acks behind a blocked first save take 2 saves,
// the second carrying all 16.
func TestAckBatchingGroupsAcksDuringASave(t *testing.T) {
	rs := &recordingSave{release: make(chan struct{})}
	l := newAckLog(true, rs.save)
	done := make(chan []error)
	go func() { done <- ackAll(l, 16) }()
	waitPending(t, l, 16) // one is in the blocked save, 15 wait for it
	close(rs.release)
	for i, err := range <-done {
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	if len(rs.saves) != 2 || len(rs.saves[0]) != 1 || len(rs.saves[1]) != 16 || l.saves() != 2 {
		t.Fatalf("saves of %v acks (%d counted), want [1 16]", lens(rs.saves), l.saves())
	}
	seen := map[string]bool{}
	for _, cp := range rs.saves[1] {
		seen[cp.Vchannel] = true
	}
	if len(seen) != 16 {
		t.Fatalf("the last save holds %d distinct acks", len(seen))
	}
}

// Without batching every ack is a save of its own, each carrying every ack
// so far.
func TestAckPerAckSavesEachAck(t *testing.T) {
	rs := &recordingSave{}
	l := newAckLog(false, rs.save)
	for i, err := range ackAll(l, 16) {
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	if len(rs.saves) != 16 || l.saves() != 16 {
		t.Fatalf("%d saves (%d counted), want 16", len(rs.saves), l.saves())
	}
	for i, s := range rs.saves {
		if len(s) != i+1 {
			t.Fatalf("save %d carries %d acks", i, len(s))
		}
	}
}

// A failed save fails the acks it carried and every ack after it; none is
// reported saved.
func TestAckBatchingFailedSaveFailsTheRest(t *testing.T) {
	boom := errors.New("boom")
	rs := &recordingSave{release: make(chan struct{}), fail: boom}
	l := newAckLog(true, rs.save)
	done := make(chan []error)
	go func() { done <- ackAll(l, 8) }()
	waitPending(t, l, 8)
	close(rs.release)
	for i, err := range <-done {
		if !errors.Is(err, boom) {
			t.Fatalf("ack %d: %v, want the save's error", i, err)
		}
	}
	if err := l.ack(&coordpb.Checkpoint{Vchannel: "late"}); !errors.Is(err, boom) {
		t.Fatalf("a later ack: %v", err)
	}
	if len(rs.saves) != 1 {
		t.Fatalf("%d saves after the failure, want 1", len(rs.saves))
	}
}

func lens(s [][]*coordpb.Checkpoint) []int {
	var out []int
	for _, x := range s {
		out = append(out, len(x))
	}
	return out
}
