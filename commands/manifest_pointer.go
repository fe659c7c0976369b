package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/coordd/coordd/vocab"
)

// Manifest pointers and revision object keys (docs/semantics.md#manifests).
//
// A pointer is the JSON {"ver":<version>,"base_path":"<prefix>"}, the form
// Milvus stores in SegmentInfo.manifest_path; version 0 means "no revision
// yet". Pointers are ordered by version within one base path. Revision v
// of a base lives at <base_path>/manifest-<v>.

// ManifestRoot is the object-key prefix of the revisions coordd writes.
const ManifestRoot = "manifest/"

// MaxManifestBaseBytes bounds a pointer's base path.
const MaxManifestBaseBytes = 512

// ManifestPointer names one revision of one segment directory.
type ManifestPointer struct {
	Base    string
	Version int64
}

// IsZero: no pointer at all (a segment that never had a manifest).
func (p ManifestPointer) IsZero() bool { return p == ManifestPointer{} }

type pointerJSON struct {
	Ver  *int64  `json:"ver"`
	Base *string `json:"base_path"`
}

// String is the canonical encoding ("" for the zero pointer): what
// encoding/json makes of {"ver":...,"base_path":...}. A base json.Marshal
// copies verbatim is written directly (appendCanonicalPointer); any other
// goes through encoding/json, so the bytes are the same either way.
func (p ManifestPointer) String() string {
	if p.IsZero() {
		return ""
	}
	if jsonVerbatim(p.Base) {
		var buf [canonicalPointerOverhead + 64]byte // most bases fit: one allocation, the string
		return string(appendCanonicalPointer(buf[:0], p))
	}
	return p.marshalJSON()
}

// marshalJSON is String's general path, through encoding/json.
func (p ManifestPointer) marshalJSON() string {
	v, b := p.Version, p.Base
	out, _ := json.Marshal(pointerJSON{Ver: &v, Base: &b}) // cannot fail for these types
	return string(out)
}

// Key is the object key of the revision the pointer names.
func (p ManifestPointer) Key() string { return ManifestKey(p.Base, p.Version) }

// ParseManifestPointer decodes a pointer; "" is the zero pointer. Both
// fields are required, the version is not negative and the base path is a
// relative object-key prefix. Any JSON encoding/json accepts for the two
// fields is read; the canonical form (the one String writes, and so every
// pointer coordd stores) is read without encoding/json, with the same
// result (parseCanonicalPointer).
func ParseManifestPointer(s string) (ManifestPointer, error) {
	if s == "" {
		return ManifestPointer{}, nil
	}
	if len(s) > MaxManifestPathBytes {
		return ManifestPointer{}, invalid("manifest pointer is %d bytes (max %d)", len(s), MaxManifestPathBytes)
	}
	if p, ok := parseCanonicalPointer(s); ok {
		if err := ValidateManifestBase(p.Base); err != nil {
			return ManifestPointer{}, err
		}
		return p, nil
	}
	return parsePointerJSON(s)
}

// parsePointerJSON is ParseManifestPointer's general path, through
// encoding/json, for a non-empty s within the length bound.
func parsePointerJSON(s string) (ManifestPointer, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var j pointerJSON
	if err := dec.Decode(&j); err != nil {
		return ManifestPointer{}, invalid("manifest pointer %q is not {\"ver\":N,\"base_path\":\"...\"}: %v", s, err)
	}
	if dec.More() {
		return ManifestPointer{}, invalid("manifest pointer %q has trailing data", s)
	}
	if j.Ver == nil || j.Base == nil {
		return ManifestPointer{}, invalid("manifest pointer %q needs both ver and base_path", s)
	}
	if *j.Ver < 0 {
		return ManifestPointer{}, invalid("manifest pointer version %d is negative", *j.Ver)
	}
	if err := ValidateManifestBase(*j.Base); err != nil {
		return ManifestPointer{}, err
	}
	return ManifestPointer{Base: *j.Base, Version: *j.Ver}, nil
}

// ValidateManifestBase checks a base path: 1..MaxManifestBaseBytes bytes of
// slash-separated segments, none empty, "." or "..", no control or
// invisible characters (vocab.IsInvisible) or backslashes.
func ValidateManifestBase(base string) error {
	if base == "" || len(base) > MaxManifestBaseBytes {
		return invalid("manifest base path must be 1..%d bytes, got %d", MaxManifestBaseBytes, len(base))
	}
	for _, c := range base {
		if c == '\\' || vocab.IsInvisible(c) {
			return invalid("manifest base path %q contains a control or invisible character or a backslash (%U)", base, c)
		}
	}
	for seg := range strings.SplitSeq(base, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return invalid("manifest base path %q has an empty, '.' or '..' segment", base)
		}
	}
	return nil
}

// ManifestBase is the base path coordd gives a segment's revisions.
func ManifestBase(collection, partition, segment int64) string {
	return fmt.Sprintf("%s%d/%d/%d", ManifestRoot, collection, partition, segment)
}

// ManifestKey is the object key of revision version under base.
func ManifestKey(base string, version int64) string {
	return base + "/manifest-" + strconv.FormatInt(version, 10)
}

// ParseManifestKey splits a revision object key into base and version.
func ParseManifestKey(key string) (base string, version int64, ok bool) {
	i := strings.LastIndex(key, "/manifest-")
	if i <= 0 {
		return "", 0, false
	}
	v, err := strconv.ParseInt(key[i+len("/manifest-"):], 10, 64)
	if err != nil || v <= 0 || ManifestKey(key[:i], v) != key {
		return "", 0, false
	}
	return key[:i], v, true
}

// SegmentOfManifestBase is the segment ID of a base path coordd made
// (ManifestBase); ok=false for any other path.
func SegmentOfManifestBase(base string) (int64, bool) {
	rest, found := strings.CutPrefix(base, ManifestRoot)
	if !found {
		return 0, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return 0, false
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	return id, err == nil && id > 0
}
