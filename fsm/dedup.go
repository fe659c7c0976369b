package fsm

import (
	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// MaxDedupEntries bounds the request-ID table. Eviction is by the order
// entries were recorded (log order), never by time, so every replica evicts
// the same entries. At a few thousand writes per second this remembers the
// last several seconds of requests, far longer than a client's retry loop.
const MaxDedupEntries = 16384

// dedupEntry is the first result recorded for a request ID.
type dedupEntry = logpb.DedupRecord

// dedupTable remembers the first result of recent request IDs so a retried
// command returns it instead of applying twice.
type dedupTable struct {
	byID  *immutable.SortedMap[string, *dedupEntry]
	bySeq *immutable.SortedMap[uint64, string] // recording order, for eviction
	seq   uint64                               // sequence of the next record
}

func newDedupTable() dedupTable {
	return dedupTable{
		byID:  immutable.NewSortedMap[string, *dedupEntry](nil),
		bySeq: immutable.NewSortedMap[uint64, string](immutable.NewComparer[uint64](0)),
	}
}

// record returns a table that also remembers id, evicting the oldest entry
// when full.
func (t dedupTable) record(id string, index uint64, typ commands.Type, r *logpb.Result) dedupTable {
	t.byID = t.byID.Set(id, &dedupEntry{RequestId: id, Index: index, Type: uint32(typ), Result: r})
	t.bySeq = t.bySeq.Set(t.seq, id)
	t.seq++
	for t.byID.Len() > MaxDedupEntries {
		it := t.bySeq.Iterator()
		seq, oldest, _ := it.Next()
		t.bySeq = t.bySeq.Delete(seq)
		t.byID = t.byID.Delete(oldest)
	}
	return t
}
