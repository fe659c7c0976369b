package commands

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Object keys a manifest revision or a catalog mutation lists
// (docs/semantics.md#manifest-keys). Every such key is parsed once, by
// ParseObjectKey, before anything looks at it: the same rules hold for
// column-group files, delta logs, stats files and index files, at the
// leader and inside Apply.
//
// A key is relative to the store's root: 1..MaxManifestFileBytes bytes of
// valid UTF-8, slash-separated elements, none empty, "." or "..", and no
// control character (NUL included) or backslash. So it is never absolute
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
	key   string
	elems []string
}

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
		if c < 0x20 || c == 0x7f || c == '\\' {
			return ObjectKey{}, invalid("object key %q contains a control character or backslash", key)
		}
	}
	elems := strings.Split(key, "/")
	for _, e := range elems {
		if e == "" || e == "." || e == ".." {
			return ObjectKey{}, invalid("object key %q is absolute or has an empty, '.' or '..' element", key)
		}
	}
	return ObjectKey{key: key, elems: elems}, nil
}

// String is the key.
func (k ObjectKey) String() string { return k.key }

// BelongsTo reports whether the key lies under one of the segment's
// directories and is not a manifest revision.
func (k ObjectKey) BelongsTo(collection, partition, segment int64) bool {
	if len(k.elems) < 5 {
		return false
	}
	if _, _, isRevision := ParseManifestKey(k.key); isRevision {
		return false
	}
	return isID(k.elems[1], collection) && isID(k.elems[2], partition) && isID(k.elems[3], segment)
}

// IsIndexFileOf reports whether the key lies in Milvus's index layout for
// this build of this segment.
func (k ObjectKey) IsIndexFileOf(build, partition, segment int64) bool {
	return len(k.elems) >= 6 && k.elems[0] == IndexFilesRoot && isID(k.elems[1], build) && isCanonicalID(k.elems[2]) &&
		isID(k.elems[3], partition) && isID(k.elems[4], segment)
}

// isID: s is exactly the decimal form of id.
func isID(s string, id int64) bool { return s == strconv.FormatInt(id, 10) }

func isCanonicalID(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n >= 0 && strconv.FormatInt(n, 10) == s
}

// SegmentKeys checks that every key lies under the segment's directories
// (BelongsTo), naming what it is in the error.
func SegmentKeys(what string, keys []string, collection, partition, segment int64) error {
	for _, f := range keys {
		k, err := ParseObjectKey(f)
		if err != nil {
			return invalid("%s: %v", what, err)
		}
		if !k.BelongsTo(collection, partition, segment) {
			return invalid("%s: object key %q does not lie under segment %d's directories (<kind>/%d/%d/%d/...)",
				what, f, segment, collection, partition, segment)
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
