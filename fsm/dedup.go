package fsm

import (
	"bytes"

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

// repeatOf answers a command whose request ID is remembered: the first
// result when it is the same request, a rejection (and no change) when the
// ID was used for another one. A record from before fingerprints existed
// compares the type only.
func repeatOf(prev *dedupEntry, c commands.Command) *logpb.Result {
	same := prev.Type == uint32(c.Type)
	if same && len(prev.Fingerprint) > 0 {
		same = bytes.Equal(prev.Fingerprint, commands.Fingerprint(c))
	}
	if !same {
		return reject(logpb.RejectCode_REJECT_INVALID,
			"request_id %q was already used for a different request (a %s at index %d); use a new request ID for a new request",
			c.RequestID, commands.Type(prev.Type), prev.Index)
	}
	return prev.Result
}

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

// newDedupEntry is the record of c's first result r, applied at index.
func newDedupEntry(c commands.Command, index uint64, r *logpb.Result) *dedupEntry {
	return &dedupEntry{RequestId: c.RequestID, Index: index, Type: uint32(c.Type), Result: r, Fingerprint: commands.Fingerprint(c)}
}

// record returns a table that also remembers e, evicting the oldest entry
// when full.
func (t dedupTable) record(e *dedupEntry) dedupTable {
	t.byID = t.byID.Set(e.RequestId, e)
	t.bySeq = t.bySeq.Set(t.seq, e.RequestId)
	t.seq++
	for t.byID.Len() > MaxDedupEntries {
		it := t.bySeq.Iterator()
		seq, oldest, _ := it.Next()
		t.bySeq = t.bySeq.Delete(seq)
		t.byID = t.byID.Delete(oldest)
	}
	return t
}
