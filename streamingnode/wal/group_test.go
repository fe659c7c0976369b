package wal

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coordd/coordd/testutil"
)

// sequencer hands out timestamps and enqueues under one lock, as the
// streaming node's PChannel slot does, so timestamps increase along the
// log while the callers wait for durability concurrently.
type sequencer struct {
	mu sync.Mutex
	ts uint64
}

func (s *sequencer) enqueue(w *Writer, v string, payload []byte, bid uint64) (*Pending, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ts++
	p, err := w.Enqueue(v, payload, bid, s.ts)
	return p, s.ts, err
}

// TestGroupCommitOrderAndSharedSync: 64 concurrent appenders to one
// PChannel: every record lands once, in the order it was enqueued (offsets
// dense, timestamps increasing along the log), each caller's answer is its
// own record, and the appends share fdatasyncs. Old code: one fdatasync per
// append (syncs == appends).
func TestGroupCommitOrderAndSharedSync(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	var seq sequencer
	const callers, each = 64, 20
	type ack struct {
		res     AppendResult
		ts      uint64
		payload string
	}
	acks := make(chan ack, callers*each)
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				payload := fmt.Sprintf("g%d-%d", g, i)
				p, ts, err := seq.enqueue(w, vchA, []byte(payload), 0)
				if err == nil {
					var res AppendResult
					if res, err = p.Wait(); err == nil {
						acks <- ack{res, ts, payload}
						continue
					}
				}
				errs <- err
				return
			}
		}(g)
	}
	wg.Wait()
	close(acks)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs := mustReadAll(t, dir, pch, "", 0)
	checkDense(t, recs, callers*each)
	for i := 1; i < len(recs); i++ {
		if recs[i].Timestamp <= recs[i-1].Timestamp {
			t.Fatalf("record %d has timestamp %d after %d: not in enqueue order", i, recs[i].Timestamp, recs[i-1].Timestamp)
		}
	}
	for a := range acks {
		r := recs[a.res.ID.Offset]
		if string(r.Payload) != a.payload || r.Timestamp != a.ts || a.res.Timestamp != a.ts {
			t.Fatalf("ack %+v for %q (ts %d) points at %q (ts %d)", a.res, a.payload, a.ts, r.Payload, r.Timestamp)
		}
	}
	if s := w.syncs.Load(); s >= callers*each {
		t.Fatalf("%d fdatasyncs for %d concurrent appends: none shared", s, callers*each)
	} else {
		t.Logf("%d appends, %d fdatasyncs", callers*each, s)
	}
}

// TestGroupCommitAcksOnlyAfterSync: while a batch's fdatasync has not
// returned, none of its callers has an answer, and the appends queued
// behind it form the next batch (one more fdatasync for all of them).
func TestGroupCommitAcksOnlyAfterSync(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	release := make(chan struct{})
	inSync := make(chan struct{}, 1)
	w.mu.Lock()
	w.beforeSync = func() {
		inSync <- struct{}{}
		<-release
	}
	w.mu.Unlock()
	var seq sequencer
	var wg sync.WaitGroup
	start := func(n int) []*Pending {
		var ps []*Pending
		for i := 0; i < n; i++ {
			p, _, err := seq.enqueue(w, vchA, []byte("x"), 0)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Wait(); err != nil {
					t.Error(err)
				}
			}()
		}
		return ps
	}
	answered := func(ps []*Pending) (n int) {
		for _, p := range ps {
			select {
			case <-p.done:
				n++
			default:
			}
		}
		return n
	}
	first := start(1)
	<-inSync // the first batch is at its fdatasync
	queued := start(10)
	testutil.Eventually(t, "the ten are queued", func() bool {
		w.qmu.Lock()
		defer w.qmu.Unlock()
		return len(w.queue) == 10
	})
	if n := answered(first) + answered(queued); n != 0 {
		t.Fatalf("%d callers answered before the fdatasync returned", n)
	}
	release <- struct{}{} // the first batch's fdatasync returns
	<-inSync              // the ten queued ones are the next batch, at its fdatasync
	if answered(first) != 1 || answered(queued) != 0 {
		t.Fatalf("answered: first %d, queued %d; want 1 and 0", answered(first), answered(queued))
	}
	close(release)
	wg.Wait()
	if s := w.syncs.Load(); s != 2 {
		t.Fatalf("%d fdatasyncs, want 2 (one per batch)", s)
	}
	checkDense(t, mustReadAll(t, dir, pch, "", 0), 11)
}

// TestGroupCommitFenceUnderConcurrency: a newer term opened while a writer
// has appends in flight: every append of the old writer that succeeded is
// in the log before the new term's first record, every one after the fence
// fails with ErrFenced, and no old-term record follows a new-term one.
func TestGroupCommitFenceUnderConcurrency(t *testing.T) {
	dir := t.TempDir()
	old := mustOpen(t, dir, pch, 1)
	var seq sequencer
	stop := make(chan struct{})
	var ok, fenced atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p, _, err := seq.enqueue(old, vchA, []byte("old"), 0)
				if err == nil {
					_, err = p.Wait()
				}
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrFenced):
					fenced.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	testutil.Eventually(t, "old-term appends commit", func() bool { return ok.Load() > 100 })
	nw := mustOpen(t, dir, pch, 2)
	okAtFence := ok.Load()
	testutil.Eventually(t, "old-term appends are fenced", func() bool { return fenced.Load() > 50 })
	seq.mu.Lock()
	seq.ts += 1 << 20
	ts := seq.ts
	seq.mu.Unlock()
	mustAppend(t, nw, vchA, "new", 0, ts)
	close(stop)
	wg.Wait()
	recs := mustReadAll(t, dir, pch, "", 0)
	checkDense(t, recs, len(recs))
	seenNew := false
	oldRecs := 0
	for _, r := range recs {
		switch r.ID.Term {
		case 1:
			if seenNew {
				t.Fatalf("old-term record at offset %d after a new-term one", r.ID.Offset)
			}
			oldRecs++
		case 2:
			seenNew = true
		}
	}
	// Acknowledged old appends are all in the log (a few more may have
	// been answered between Open and reading ok).
	if int64(oldRecs) != ok.Load() || int64(oldRecs) < okAtFence {
		t.Fatalf("%d old-term records in the log, %d acknowledged (%d when the fence rose)", oldRecs, ok.Load(), okAtFence)
	}
}

// TestGroupCommitDedupAndRegressionPerRecord: inside one batch a duplicate
// (of a record in the log or earlier in the batch) dedups and a timestamp
// regression fails only that record.
func TestGroupCommitDedupAndRegressionPerRecord(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	first := mustAppend(t, w, vchA, "logged", 7, 1)
	var ps []*Pending
	for _, e := range []struct {
		payload string
		bid, ts uint64
	}{{"a", 0, 2}, {"dup-of-logged", 7, 3}, {"b", 8, 4}, {"dup-of-b", 8, 5}, {"regress", 0, 3}, {"c", 0, 6}} {
		p, err := w.Enqueue(vchA, []byte(e.payload), e.bid, e.ts)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	res := make([]AppendResult, len(ps))
	errs := make([]error, len(ps))
	res[0], errs[0] = ps[0].Wait() // leads: the whole queue is one batch
	for i := 1; i < len(ps); i++ {
		res[i], errs[i] = ps[i].Wait()
	}
	if s := w.syncs.Load(); s != 2 {
		t.Fatalf("%d fdatasyncs, want 2 (the first append, then one batch)", s)
	}
	if errs[0] != nil || res[0].ID.Offset != 1 {
		t.Fatalf("a: %+v %v", res[0], errs[0])
	}
	if errs[1] != nil || !res[1].Duplicate || res[1].ID != first.ID {
		t.Fatalf("dup of logged: %+v %v", res[1], errs[1])
	}
	if errs[2] != nil || res[2].ID.Offset != 2 || errs[3] != nil || !res[3].Duplicate || res[3].ID != res[2].ID {
		t.Fatalf("b and its duplicate: %+v %v / %+v %v", res[2], errs[2], res[3], errs[3])
	}
	if !errors.Is(errs[4], ErrTimestampRegression) {
		t.Fatalf("regression: %v", errs[4])
	}
	if errs[5] != nil || res[5].ID.Offset != 3 {
		t.Fatalf("c: %+v %v", res[5], errs[5])
	}
	if got := payloads(mustReadAll(t, dir, pch, "", 0)); got != "logged,a,b,c" {
		t.Fatalf("log: %q", got)
	}
}
