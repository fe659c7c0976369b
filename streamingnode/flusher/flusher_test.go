package flusher

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/coordd/coordd/binlog"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/streamingnode/dml"
	"github.com/coordd/coordd/streamingnode/wal"
)

const testP = "fl-p0"

type rig struct {
	t     *testing.T
	host  *fakeHost
	coord *fakeCoord
	store objectstore.Store
	term  int64
	stop  func()
	m     *Manager      // the current owner's
	opt   func(*Config) // applied to every manager's configuration
}

func newRig(t *testing.T) *rig { return newRigWithStore(t, "") }

// newRigWithStore uses the object store at url ("" = a directory).
func newRigWithStore(t *testing.T, url string) *rig { return newRigWith(t, url, nil) }

// newRigWith also adjusts each manager's configuration with opt.
func newRigWith(t *testing.T, url string, opt func(*Config)) *rig {
	dir := t.TempDir()
	if url == "" {
		url = filepath.Join(dir, "objects")
	}
	store, err := objectstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	r := &rig{t: t, host: &fakeHost{dir: filepath.Join(dir, "wal")}, store: store, opt: opt,
		coord: newFakeCoord(map[int64][]string{1: {testP + "_1v0"}, 2: {testP + "_2v0"}})}
	r.takeOver()
	return r
}

// takeOver opens the WAL at the next term (the previous owner is fenced)
// and starts a fresh manager, as a new owner would after a crash.
func (r *rig) takeOver() {
	if r.stop != nil {
		r.stop()
	}
	r.term++
	r.host.mu.Lock()
	if r.host.w != nil {
		r.host.w.Close()
	}
	w, err := wal.Open(r.host.dir, testP, r.term)
	if err != nil {
		r.t.Fatal(err)
	}
	r.host.w = w
	r.host.mu.Unlock()
	r.coord.mu.Lock()
	r.coord.owner[testP] = r.term
	r.coord.mu.Unlock()
	cfg := Config{Host: r.host, Coord: r.coord, Store: r.store, TickInterval: 5 * time.Millisecond, PollInterval: time.Millisecond,
		ReconcileInterval: 5 * time.Millisecond, RefreshInterval: 5 * time.Millisecond}
	if r.opt != nil {
		r.opt(&cfg)
	}
	m := New(cfg)
	r.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	r.stop = func() { cancel(); <-done }
	r.t.Cleanup(func() {
		if r.stop != nil {
			r.stop()
			r.stop = nil
		}
	})
}

func (r *rig) insert(coll, seg int64, pks ...int64) {
	p, err := dml.EncodeInsert(&dml.Insert{Collection: coll, Segment: seg, PKs: pks})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.host.append(fmt.Sprintf("%s_%dv0", testP, coll), p); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) waitFlushed(ids ...int64) {
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for st := r.coord.state(id); st != "Flushed" && st != "Dropped"; st = r.coord.state(id) {
			if time.Now().After(deadline) {
				r.t.Fatalf("segment %d still %s", id, st)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// persisted reads every Flushed segment's binlogs: pk -> how many times.
func (r *rig) persisted() map[int64]int {
	r.coord.mu.Lock()
	defer r.coord.mu.Unlock()
	count := map[int64]int{}
	for _, s := range r.coord.segs {
		if s.state != "Flushed" {
			continue
		}
		for _, log := range s.logs {
			id := binlog.ID{Collection: s.coll, Partition: 0, Segment: s.id, Field: binlog.PKFieldID, LogID: log}
			data, err := r.store.Get(context.Background(), id.Path())
			if err != nil {
				r.t.Fatal(err)
			}
			obj, err := binlog.Decode(data)
			if err != nil {
				r.t.Fatal(err)
			}
			if obj.ID != id {
				r.t.Fatalf("object %s says it is %s", id.Path(), obj.ID.Path())
			}
			for _, row := range obj.Rows {
				count[row.PK]++
			}
		}
	}
	return count
}

func (r *rig) waitCheckpointsAtEnd() {
	end, _ := r.host.WALEnd(testP, r.term)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.coord.mu.Lock()
		cp1, cp2 := r.coord.cps[testP+"_1v0"], r.coord.cps[testP+"_2v0"]
		r.coord.mu.Unlock()
		if cp1 != nil && cp2 != nil && cp1.Offset >= end && cp2.Offset >= end {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("checkpoints %v %v, WAL end %d", cp1, cp2, end)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestFlushWritesBinlogsAndCheckpoints(t *testing.T) {
	r := newRig(t)
	r.coord.segment(10, 1, testP+"_1v0")
	r.coord.segment(20, 2, testP+"_2v0")
	r.insert(1, 10, 1, 2, 3)
	r.insert(2, 20, 4)
	r.insert(1, 10, 5)
	r.coord.flush(r.term, 10)
	r.waitFlushed(10)
	got := r.persisted()
	if len(got) != 4 || got[1] != 1 || got[5] != 1 || got[4] != 0 {
		t.Fatalf("persisted %v, want pks 1,2,3,5 once", got)
	}
	// Segment 20 is still buffered from offset 1, so its VChannel's
	// checkpoint stays there; collection 1's VChannel moves past it all.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.coord.mu.Lock()
		cp1, cp2 := r.coord.cps[testP+"_1v0"], r.coord.cps[testP+"_2v0"]
		tick := r.coord.ticks[testP+"_2v0"]
		r.coord.mu.Unlock()
		if cp1 != nil && cp1.Offset == 3 && cp2 != nil && cp2.Offset == 1 && tick > 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoints %v %v, tick %d", cp1, cp2, tick)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// An empty segment flushes as empty (and is dropped).
	r.coord.segment(30, 1, testP+"_1v0")
	r.coord.flush(r.term, 30)
	r.waitFlushed(30)
	if st := r.coord.state(30); st != "Dropped" {
		t.Fatalf("empty segment is %s", st)
	}
	if r.coord.cpRegress != 0 {
		t.Fatalf("%d checkpoint reports tried to move back", r.coord.cpRegress)
	}
}

// A new owner recovers from coordd's state alone: rows of segments flushed
// before the takeover are not buffered again, rows of unflushed segments
// are, and each row ends in exactly one Flushed segment.
func TestTakeoverExactlyOnce(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { takeoverExactlyOnce(t, seed, "", nil) })
	}
}

// takeoverExactlyOnce: random inserts into random segments of two
// VChannels, rounds of flushing some segments and taking over; every row
// must end in exactly one Flushed segment. url is the object store (""
// = a directory).
func takeoverExactlyOnce(t *testing.T, seed int64, url string, opt func(*Config)) *rig {
	rng := rand.New(rand.NewSource(seed))
	r := newRigWith(t, url, opt)
	pk := int64(1)
	nextSeg := int64(100)
	open := map[int64]int64{} // segment -> collection
	var all []int64
	for round := 0; round < 4; round++ {
		for i := 0; i < 30; i++ {
			coll := int64(1 + rng.Intn(2))
			var seg int64
			for s, c := range open {
				if c == coll && rng.Intn(3) > 0 {
					seg = s
				}
			}
			if seg == 0 {
				seg = nextSeg
				nextSeg++
				open[seg] = coll
				r.coord.segment(seg, coll, fmt.Sprintf("%s_%dv0", testP, coll))
			}
			n := 1 + rng.Intn(3)
			var pks []int64
			for j := 0; j < n; j++ {
				pks = append(pks, pk)
				all = append(all, pk)
				pk++
			}
			r.insert(coll, seg, pks...)
		}
		// Flush some segments, then crash and take over.
		var ids []int64
		for s := range open {
			if rng.Intn(2) == 0 {
				ids = append(ids, s)
				delete(open, s)
			}
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		r.coord.flush(r.term, ids...)
		r.waitFlushed(ids...)
		r.takeOver()
	}
	var rest []int64
	for s := range open {
		rest = append(rest, s)
	}
	r.coord.flush(r.term, rest...)
	r.waitFlushed(rest...)
	got := r.persisted()
	for _, p := range all {
		if got[p] != 1 {
			t.Fatalf("pk %d persisted %d times", p, got[p])
		}
	}
	if len(got) != len(all) {
		t.Fatalf("%d pks persisted, %d inserted", len(got), len(all))
	}
	// Nothing stays buffered: every VChannel's checkpoint reaches the
	// end of the WAL (a row replayed into a segment that was already
	// flushed would hold it back forever).
	r.waitCheckpointsAtEnd()
	return r
}

// Flush tasks of an older term are not this owner's to do.
func TestTasksOfAnotherTermIgnored(t *testing.T) {
	r := newRig(t)
	r.coord.segment(10, 1, testP+"_1v0")
	r.insert(1, 10, 1)
	r.coord.flush(r.term+5, 10)
	// A task of this owner's term in the same set is done; the other not.
	r.coord.segment(11, 1, testP+"_1v0")
	r.insert(1, 11, 2)
	r.coord.flush(r.term, 11)
	r.waitFlushed(11)
	if st := r.coord.state(10); st != "Flushing" {
		t.Fatalf("segment flushed for a task of another term: %s", st)
	}
}

// Rows of a VChannel coordd no longer knows (a dropped collection) are
// skipped; the flusher goes on with the others.
func TestUnknownVChannelSkipped(t *testing.T) {
	r := newRig(t)
	r.coord.segment(10, 1, testP+"_1v0")
	r.insert(3, 99, 1, 2) // collection 3 is not known to coordd
	r.insert(1, 10, 3)
	r.coord.flush(r.term, 10)
	r.waitFlushed(10)
	if got := r.persisted(); len(got) != 1 || got[3] != 1 {
		t.Fatalf("persisted %v, want only pk 3", got)
	}
}

// A collection created after the flusher started gets time ticks and a
// checkpoint before any row is written to it (a flush of it must be able
// to complete), and its later rows are flushed as usual.
func TestNewCollectionFollowed(t *testing.T) {
	r := newRig(t)
	r.coord.segment(10, 1, testP+"_1v0")
	r.insert(1, 10, 1)
	r.coord.flush(r.term, 10)
	r.waitFlushed(10)
	v := testP + "_4v0"
	r.coord.mu.Lock()
	r.coord.vchs[4] = []string{v}
	r.coord.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.coord.mu.Lock()
		cp, tick := r.coord.cps[v], r.coord.ticks[v]
		r.coord.mu.Unlock()
		if cp != nil && tick > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint or tick for the new collection's vchannel (cp %v, tick %d)", cp, tick)
		}
		time.Sleep(2 * time.Millisecond)
	}
	r.coord.segment(40, 4, v)
	r.insert(4, 40, 7, 8)
	r.coord.flush(r.term, 40)
	r.waitFlushed(40)
	if got := r.persisted(); got[7] != 1 || got[8] != 1 || got[1] != 1 {
		t.Fatalf("persisted %v", got)
	}
}
