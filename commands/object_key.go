package commands

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/coordd/coordd/vocab"
)

// Object keys a manifest revision or a catalog mutation lists
// (docs/semantics.md#manifest-keys). Every such key is parsed once, by
// ParseObjectKey, before anything looks at it: the same rules hold for
// column-group files, delta logs, stats files and index files, at the
// leader and inside Apply.
//
// A key is relative to the store's root: 1..MaxManifestFileBytes bytes of
// valid UTF-8, slash-separated elements, none empty, "." or "..", and no
// control character (NUL included, C1 too), no other character a reader
// cannot see (bidi controls, zero-width characters: vocab.IsInvisible) and
// no backslash. So it is never absolute
// ("/etc/passwd" has an empty first element) and never climbs out of its
// prefix.
//
// A key belongs to segment (collection, partition, segment) when it lies
// under that segment's directory of some log kind, the binlog layout
// (docs/semantics.md#segment-states):
//
//	<kind>/<collection>/<partition>/<segment>/<rest...>
//
// (insert_log, stats_log, delta_log, bm25_stats, ..., and the segment's
// manifest base), and is not a manifest revision itself. An index file may
// also lie in Milvus's index layout,
//
//	index_files/<build>/<index version>/<partition>/<segment>/<rest...>
//
// with the entry's own build ID.

// ObjectKey is a parsed, clean object key.
type ObjectKey struct {
	key string
	// head holds the first keyHead elements (substrings of key, so parsing
	// allocates nothing: it runs for every file of every revision a commit
	// writes, at the leader and in every member's Apply); n counts them all.
	head [keyHead]string
	n    int
}

// keyHead is how many leading elements an ObjectKey keeps: the layouts
// below read at most the first five.
const keyHead = 6

// IndexFilesRoot is the first element of Milvus's index file keys.
const IndexFilesRoot = "index_files"

// ParseObjectKey checks a listed key's shape (see above).
func ParseObjectKey(key string) (ObjectKey, error) {
	if key == "" || len(key) > MaxManifestFileBytes {
		return ObjectKey{}, invalid("an object key must be 1..%d bytes, got %d", MaxManifestFileBytes, len(key))
	}
	if !utf8.ValidString(key) {
		return ObjectKey{}, invalid("object key %q is not valid UTF-8", key)
	}
	for _, c := range key {
		if c == '\\' || vocab.IsInvisible(c) {
			return ObjectKey{}, invalid("object key %q contains a control or invisible character or a backslash (%U)", key, c)
		}
	}
	k := ObjectKey{key: key}
	for e := range strings.SplitSeq(key, "/") {
		if !cleanElem(e) {
			return ObjectKey{}, invalid("object key %q is absolute or has an empty, '.' or '..' element", key)
		}
		if k.n < keyHead {
			k.head[k.n] = e
		}
		k.n++
	}
	return k, nil
}

// cleanElem: e may be an element of a relative key (not empty, "." or
// "..").
func cleanElem(e string) bool { return e != "" && e != "." && e != ".." }

// String is the key.
func (k ObjectKey) String() string { return k.key }

// BelongsTo reports whether the key lies under one of the segment's
// directories and is not a manifest revision.
func (k ObjectKey) BelongsTo(collection, partition, segment int64) bool {
	if k.n < 5 {
		return false
	}
	if _, _, isRevision := ParseManifestKey(k.key); isRevision {
		return false
	}
	return isID(k.head[1], collection) && isID(k.head[2], partition) && isID(k.head[3], segment)
}

// IsIndexFileOf reports whether the key lies in Milvus's index layout for
// this build of this segment.
func (k ObjectKey) IsIndexFileOf(build, partition, segment int64) bool {
	return k.n >= 6 && k.head[0] == IndexFilesRoot && isID(k.head[1], build) && isCanonicalID(k.head[2]) &&
		isID(k.head[3], partition) && isID(k.head[4], segment)
}

// isID: s is exactly the decimal form of id (formatted on the stack).
func isID(s string, id int64) bool {
	var buf [20]byte
	return string(strconv.AppendInt(buf[:0], id, 10)) == s
}

func isCanonicalID(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n >= 0 && strconv.FormatInt(n, 10) == s
}

// SegmentKeys checks that every key lies under the segment's directories
// (BelongsTo), naming what it is in the error.
func SegmentKeys(what string, keys []string, collection, partition, segment int64) error {
	return segmentKeys(func() string { return what }, keys, collection, partition, segment)
}

// StatsKeyFiles is SegmentKeys for the files of stats key key, named
// "stats key <key>" in the error; the name is built only for an error.
func StatsKeyFiles(key string, files []string, collection, partition, segment int64) error {
	return segmentKeys(func() string { return "stats key " + key }, files, collection, partition, segment)
}

func segmentKeys(what func() string, keys []string, collection, partition, segment int64) error {
	for _, f := range keys {
		k, err := ParseObjectKey(f)
		if err != nil {
			return invalid("%s: %v", what(), err)
		}
		if !k.BelongsTo(collection, partition, segment) {
			return invalid("%s: object key %q does not lie under segment %d's directories (<kind>/%d/%d/%d/...)",
				what(), f, segment, collection, partition, segment)
		}
	}
	return nil
}

// IndexKeys checks an index entry's files: the segment's directories or
// the index layout of this build.
func IndexKeys(build int64, keys []string, collection, partition, segment int64) error {
	for _, f := range keys {
		k, err := ParseObjectKey(f)
		if err != nil {
			return invalid("index build %d: %v", build, err)
		}
		if !k.BelongsTo(collection, partition, segment) && !k.IsIndexFileOf(build, partition, segment) {
			return invalid("index build %d: object key %q lies neither under segment %d's directories nor under %s/%d/<version>/%d/%d/",
				build, f, segment, IndexFilesRoot, build, partition, segment)
		}
	}
	return nil
}
