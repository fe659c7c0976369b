package flusher

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/streamingnode/dml"
	"github.com/coordd/coordd/streamingnode/wal"
)

// BenchmarkRecovery: a new owner resumes a PChannel whose WAL holds, after
// the checkpoint, 100k rows of unflushed segments (to buffer again) and the
// rows of 1,000 flushed segments (to filter out), interleaved, 100 rows per
// message. One op is: start the flusher, recover from coordd's state,
// replay, report a time tick at the end of the WAL.
func BenchmarkRecovery(b *testing.B) {
	const flushed, unflushed, rowsPerMsg = 1000, 10, 100
	const unflushedMsgs = 100_000 / rowsPerMsg
	dir := b.TempDir()
	w, err := wal.Open(filepath.Join(dir, "wal"), testP, 1)
	if err != nil {
		b.Fatal(err)
	}
	v := testP + "_1v0"
	coord := newFakeCoord(map[int64][]string{1: {v}})
	ts := uint64(0)
	pk := int64(1)
	app := func(seg int64) *coordpb.Position {
		pks := make([]int64, rowsPerMsg)
		for i := range pks {
			pks[i] = pk
			pk++
		}
		p, _ := dml.EncodeInsert(&dml.Insert{Collection: 1, Segment: seg, PKs: pks})
		ts++
		res, err := w.Append(v, p, 0, ts)
		if err != nil {
			b.Fatal(err)
		}
		return &coordpb.Position{Term: res.ID.Term, Offset: res.ID.Offset, Timestamp: ts}
	}
	for i := 0; i < max(flushed, unflushedMsgs); i++ {
		if i < unflushedMsgs {
			seg := int64(1 + i%unflushed)
			pos := app(seg)
			if i == 0 {
				coord.cps[v] = pos
			}
			if coord.segs[seg] == nil {
				coord.segs[seg] = &fakeSeg{id: seg, coll: 1, vch: v, state: "Growing"}
			}
		}
		if i < flushed {
			seg := int64(10_000 + i)
			pos := app(seg)
			coord.segs[seg] = &fakeSeg{id: seg, coll: 1, vch: v, state: "Flushed", dml: pos, start: pos, rows: rowsPerMsg}
		}
	}
	last := ts
	store, err := objectstore.Open(context.Background(), filepath.Join(dir, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	coord.owner[testP] = 1
	host := &fakeHost{dir: filepath.Join(dir, "wal"), w: w, ts: ts}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		coord.mu.Lock()
		coord.ticks = map[string]uint64{}
		coord.mu.Unlock()
		m := New(Config{Host: host, Coord: coord, Store: store, TickInterval: time.Millisecond, PollInterval: time.Millisecond,
			ReconcileInterval: time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		for {
			coord.mu.Lock()
			t := coord.ticks[v]
			coord.mu.Unlock()
			if t >= last {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		cancel()
		<-done
	}
	b.ReportMetric(float64(unflushedMsgs*rowsPerMsg), "rows-buffered")
	b.ReportMetric(float64(flushed), "flushed-segments")
}
