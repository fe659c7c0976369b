package manifest

import (
	"container/list"
	"sync"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/fsm"
)

// Pipelining (docs/semantics.md#manifest-pipelining). A segment's lock
// is held only until its publication is queued in the raft node's
// proposal queue (commands.OnQueued), not until it commits, so the next
// commit on the segment is prepared while the previous one is in flight.
// It builds on the previous one's result, the segment's tail, instead of
// the applied state. This is safe because Apply decides: a structured
// publication applies only if the pointer is still its base. And it is
// useful because the order commits take the lock is the order they are
// queued, which is their order in the log: a commit built on a tail is
// applied after the tail's publication, so it succeeds exactly when its
// predecessor did. When the predecessor fails, the successor is refused
// as stale and retried from the applied state (Committer.Commit).

// maxCachedTails bounds the entries kept for segments with nothing in
// flight (a settled tail caches the current revision's content: one
// decoded revision each).
const maxCachedTails = 1024

// tail is the newest publication this leader proposed on one segment.
type tail struct {
	seq     uint64 // the attempt that proposed it
	lineage uint64 // the first attempt of its chain (built on the applied state)
	term    uint64 // the decision term it was proposed in
	ptr     commands.ManifestPointer
	// rev is the content stored at ptr, exactly: the revision this leader
	// encoded and created there, or read from there. Objects are never
	// overwritten, so it stays the content of ptr.
	rev        *coordpb.ManifestRevision
	coll, part int64 // the segment's collection and partition
	// pending: proposed and not yet known to have applied or failed. Only
	// a pending tail of the established term is built on; a settled one
	// is a cache, used while the applied pointer equals ptr.
	pending bool
}

// basis is what one attempt of a commit builds a segment's next revision
// on: a pending tail (onTail), or the applied state, with the content of
// the pointer when a tail caches it.
type basis struct {
	seq, lineage uint64
	onTail       bool
	tail         *tail // the tail built on (onTail) or the cache hit; nil if none
	// top is the highest version this leader wrote at tail's base (0:
	// unknown); numbering starts above it, so an attempt retried after
	// its predecessors failed does not probe their orphans one by one.
	top  int64
	base string // the base top refers to
}

// segTail is one segment's entry in the tail table.
type segTail struct {
	tail     *tail
	inflight int           // publications queued and not yet answered
	top      int64         // highest version written at topBase
	topBase  string        // the base top refers to
	lru      *list.Element // in tailTable.lru while nothing is in flight
}

// tailTable holds every segment's tail. Attempts on one segment take
// their sequence number under the segment's lock, so seq order is lock
// order, which is log order.
type tailTable struct {
	mu   sync.Mutex
	seq  uint64
	segs map[int64]*segTail
	lru  *list.List // entries with nothing in flight, oldest first (segment IDs)
}

func newTailTable() *tailTable { return &tailTable{segs: map[int64]*segTail{}, lru: list.New()} }

// begin starts an attempt on each of ids (their locks held) in term. It
// reads the applied state with state while it holds the table, so the
// state is at least as new as every tail it sees settled or dropped (an
// answer is recorded only after its command applied): a tail that was
// pending a moment ago and is gone now is in the state. It builds on a
// tail when that is pending in term and the applied pointer has not
// reached it; a tail of another term is dropped.
func (t *tailTable) begin(ids []int64, term uint64, state func() *fsm.State) (*fsm.State, []basis) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := state()
	out := make([]basis, len(ids))
	for i, id := range ids {
		applied, ok, err := st.ManifestPointer(id)
		out[i] = t.begin1(id, term, applied, ok && err == nil)
	}
	return st, out
}

func (t *tailTable) begin1(id int64, term uint64, applied commands.ManifestPointer, ok bool) basis {
	t.seq++
	b := basis{seq: t.seq, lineage: t.seq}
	e := t.segs[id]
	if e == nil {
		return b
	}
	b.top, b.base = e.top, e.topBase
	tl := e.tail
	if tl != nil && tl.term != term {
		t.dropTail(id, e) // a term change invalidates every tail
		tl = nil
	}
	switch {
	case tl == nil:
	case ok && applied == tl.ptr:
		b.tail = tl // published: a cache hit, built on the applied state
	case tl.pending && !(ok && applied.Base == tl.ptr.Base && applied.Version > tl.ptr.Version):
		b.onTail, b.tail, b.lineage = true, tl, tl.lineage
	}
	return b
}

// queued records the publication of attempt b (its lock still held) as
// the segment's tail: pending, in flight.
func (t *tailTable) queued(id int64, b basis, nt *tail) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(id)
	e.inflight++
	t.touch(id, e)
	if nt == nil {
		return // nothing new to build on (a prepared revision already published)
	}
	nt.seq, nt.lineage, nt.pending = b.seq, b.lineage, true
	if e.tail == nil || e.tail.seq <= nt.seq {
		t.setTail(id, e, nt)
	}
}

// wrote records that version v was created at base (the numbering hint).
func (t *tailTable) wrote(id int64, base string, v int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(id)
	if e.topBase != base || v > e.top {
		e.top, e.topBase = v, base
	}
	t.touch(id, e)
}

// outcome is how an attempt's proposal ended, for finish.
type outcome int

const (
	applied outcome = iota // applied and published nt
	refused                // Apply refused it: nothing changed
	unknown                // may or may not apply (or was not queued)
)

// finish records the end of attempt b on segment id (queued: its
// publication had been queued). Applied: nt is the published revision,
// kept as a settled cache unless a newer attempt's tail replaced it.
// Refused: the tail of b's chain from b on is dropped, since every later
// attempt of the chain built on b. Unknown: the tail stays; if it never
// applies, the successors are refused and retried.
func (t *tailTable) finish(id int64, b basis, queued bool, o outcome, nt *tail) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.segs[id]
	if e == nil {
		if o != applied || nt == nil {
			return
		}
		e = t.entry(id)
	}
	if queued {
		e.inflight--
	}
	switch o {
	case applied:
		if nt != nil && (e.tail == nil || e.tail.seq <= b.seq) {
			nt.seq, nt.lineage, nt.pending = b.seq, b.lineage, false
			t.setTail(id, e, nt)
		}
	case refused:
		if e.tail != nil && e.tail.lineage == b.lineage && e.tail.seq >= b.seq {
			t.dropTail(id, e)
		}
	}
	t.touch(id, e)
}

// inFlight reports whether a publication on segment id is queued and not
// yet answered (the orphan collector leaves such segments alone).
func (t *tailTable) inFlight(id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.segs[id]
	return e != nil && e.inflight > 0
}

func (t *tailTable) entry(id int64) *segTail {
	e := t.segs[id]
	if e == nil {
		e = &segTail{}
		t.segs[id] = e
	}
	return e
}

// setTail installs nt as the segment's tail.
func (t *tailTable) setTail(id int64, e *segTail, nt *tail) { e.tail = nt }

func (t *tailTable) dropTail(id int64, e *segTail) { e.tail = nil }

// touch keeps the entries with nothing in flight in the bounded LRU
// (maxCachedTails); evicting one loses a cache and a numbering hint,
// never correctness.
func (t *tailTable) touch(id int64, e *segTail) {
	if e.lru != nil {
		t.lru.Remove(e.lru)
		e.lru = nil
	}
	if e.inflight > 0 {
		return
	}
	e.lru = t.lru.PushBack(id)
	for t.lru.Len() > maxCachedTails {
		old := t.lru.Remove(t.lru.Front()).(int64)
		delete(t.segs, old)
	}
}
