package vocab

import "unicode"

// IsInvisible reports whether r is a character that a terminal or a
// reader does not show as itself, so a name holding it can hide or fake
// what it says: a control character (C0, DEL, C1: Unicode category Cc),
// a format character (bidi embeddings, overrides, isolates and marks,
// zero-width spaces and joiners, the byte-order mark, the soft hyphen:
// category Cf), or a line or paragraph separator (Zl, Zp). Names that
// operators read (object keys, stats keys, resource groups) refuse them.
func IsInvisible(r rune) bool {
	if r < 0x80 {
		return r < 0x20 || r == 0x7f
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// FirstInvisible returns the first invisible character of s (IsInvisible)
// and true, or false when it has none.
func FirstInvisible(s string) (rune, bool) {
	for _, r := range s {
		if IsInvisible(r) {
			return r, true
		}
	}
	return 0, false
}
