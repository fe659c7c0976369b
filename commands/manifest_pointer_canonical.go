package commands

import (
	"strconv"
	"strings"
)

// The canonical pointer form, read and written without encoding/json.
// Every pointer coordd stores is canonical (validateManifestPointers
// refuses any other in a publication), and pointers are parsed and
// formatted several times per manifest commit on the leader and in every
// member's Apply, where encoding/json's reflection was a visible share of
// the CPU (bench/RESULTS.md, issue 23, W4). The general JSON path stays
// for every other input, so the results are those of encoding/json.

const (
	canonicalPointerPrefix = `{"ver":`
	canonicalPointerMiddle = `,"base_path":"`
	canonicalPointerSuffix = `"}`
	// canonicalPointerOverhead is the length of a canonical pointer
	// without its base path, with room for any int64.
	canonicalPointerOverhead = len(canonicalPointerPrefix) + 20 + len(canonicalPointerMiddle) + len(canonicalPointerSuffix)
)

// jsonVerbatim: json.Marshal writes s between the quotes unchanged. It
// escapes control characters, '"', '\\', and (HTML-safe by default) '<',
// '>' and '&', and rewrites invalid UTF-8 and U+2028/U+2029; printable
// ASCII other than those five passes as is. Anything else (any byte of
// 0x80 or more included) is left to encoding/json.
func jsonVerbatim(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendCanonicalPointer appends p as json.Marshal writes pointerJSON;
// p.Base must be jsonVerbatim.
func appendCanonicalPointer(b []byte, p ManifestPointer) []byte {
	b = append(b, canonicalPointerPrefix...)
	b = strconv.AppendInt(b, p.Version, 10)
	b = append(b, canonicalPointerMiddle...)
	b = append(b, p.Base...)
	return append(b, canonicalPointerSuffix...)
}

// parseCanonicalPointer reads s when it is exactly
// {"ver":<digits>,"base_path":"<jsonVerbatim base>"}: a JSON number
// without sign, leading zero or fraction that fits an int64, no spaces,
// the fields in this order, nothing after. For such an s encoding/json
// decodes the same two values with no error, so the caller's checks that
// follow (the base path's shape) are the only ones left. ok=false: not
// canonical, use the general path (which also produces the errors).
func parseCanonicalPointer(s string) (p ManifestPointer, ok bool) {
	rest, ok := strings.CutPrefix(s, canonicalPointerPrefix)
	if !ok {
		return p, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n > 1 && rest[0] == '0' {
		return p, false
	}
	v, err := strconv.ParseInt(rest[:n], 10, 64)
	if err != nil {
		return p, false
	}
	rest, ok = strings.CutPrefix(rest[n:], canonicalPointerMiddle)
	if !ok {
		return p, false
	}
	base, ok := strings.CutSuffix(rest, canonicalPointerSuffix)
	if !ok || !jsonVerbatim(base) {
		return p, false
	}
	return ManifestPointer{Base: base, Version: v}, true
}
