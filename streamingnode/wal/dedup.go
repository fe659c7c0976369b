package wal

import "github.com/coordd/coordd/streamingnode/dml"

// Dedup key spaces. A record with a non-zero ID is idempotent per (space,
// ID, vchannel), and the two spaces never meet:
//
//   - spaceBroadcast: every message that is not a DML message. Its ID is a
//     broadcast ID, and only coordd's broadcaster writes such records (the
//     node refuses a broadcast ID on any Append without a coordinator
//     term, which only coordd's server identity may send).
//   - spaceDML: DML messages (streamingnode/dml, written only by Insert).
//     Its ID is the writer's dedup ID, which any data-path writer chooses.
//
// The space is a function of the payload, which is in the record, so the
// index rebuilt when a log is opened puts every record where its first
// append did, and records written before the spaces were split (the
// on-disk format did not change) fall into the same spaces: an Insert's
// dedup ID was always on a DML message. A writer's dedup ID can therefore
// neither claim a broadcast's key nor be answered with a broadcast's record
// (docs/security.md#broadcast-records).
type space uint8

const (
	spaceBroadcast space = iota
	spaceDML
)

// spaceOf is the key space a record with this payload dedups in.
func spaceOf(payload []byte) space {
	if dml.IsDML(payload) {
		return spaceDML
	}
	return spaceBroadcast
}

type dedupKey struct {
	space    space
	id       uint64
	vchannel string
}

type dedupVal struct {
	id MessageID
	ts uint64
}

// keyOf is the index key of a record with this payload, ID and vchannel;
// ok is false when the ID is 0 (the record is not deduplicated).
func keyOf(payload []byte, id uint64, vchannel string) (k dedupKey, ok bool) {
	if id == 0 {
		return dedupKey{}, false
	}
	return dedupKey{spaceOf(payload), id, vchannel}, true
}

// setDedupID puts id in the field of r that its payload's space names.
func (r *Record) setDedupID(id uint64) {
	if spaceOf(r.Payload) == spaceDML {
		r.DedupID = id
	} else {
		r.BroadcastID = id
	}
}

// dedupID is the ID stored in r's ID field (at most one of the two is set).
func (r *Record) dedupID() uint64 { return r.BroadcastID | r.DedupID }
