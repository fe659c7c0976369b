package commands

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestParseObjectKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"insert_log/100/1/5/100/7":    true,
		"stats_log/100/1/5/bloom/0":   true,
		"a..b":                        true,
		"":                            false,
		"/etc/passwd":                 false,
		"../../etc/passwd":            false,
		"insert_log/../../../x":       false,
		"insert_log/./x":              false,
		"a//b":                        false,
		"a/":                          false,
		"a\x00b":                      false,
		"a\\b":                        false,
		"a\x7fb":                      false,
		"\xff":                        false,
		"a\u0085b":                    false, // C1 control (probe L12)
		"\u202egpj.exe":               false, // bidi override
		"a\u200bb":                    false, // zero-width space
		"a\u2066b\u2069":              false, // bidi isolate
		"a\ufeffb":                    false, // byte-order mark
		"a\u2028b":                    false, // line separator
		"stats_log/100/1/5/é/中":       true,
		strings.Repeat("a", 1025):     false,
		strings.Repeat("a/", 512)[1:]: false,
	} {
		if _, err := ParseObjectKey(key); (err == nil) != ok {
			t.Errorf("ParseObjectKey(%q): %v, want ok=%v", key, err, ok)
		}
	}
	own := func(k string) bool {
		p, err := ParseObjectKey(k)
		return err == nil && p.BelongsTo(100, 1, 5)
	}
	for key, want := range map[string]bool{
		"insert_log/100/1/5/100/7":    true,
		"delta_log/100/1/5/9":         true,
		"manifest/100/1/5/data/0":     true,
		"insert_log/100/1/5":          false, // the directory itself
		"insert_log/200/1/5/100/7":    false, // another collection
		"insert_log/100/2/5/100/7":    false, // another partition
		"insert_log/100/1/6/100/7":    false, // another segment
		"insert_log/100/1/05/100/7":   false, // not the canonical ID
		"manifest/100/1/5/manifest-1": false, // a revision, not a file
		"stats/5/bloom":               false,
	} {
		if got := own(key); got != want {
			t.Errorf("%q belongs to segment 5: %v, want %v", key, got, want)
		}
	}
	if err := IndexKeys(40, []string{"index_files/40/1/1/5/x"}, 100, 1, 5); err != nil {
		t.Errorf("Milvus index layout refused: %v", err)
	}
	if err := IndexKeys(40, []string{"index_files/41/1/1/5/x"}, 100, 1, 5); err == nil {
		t.Error("another build's index file accepted")
	}
}

// FuzzParseObjectKey: whatever the input, an accepted key is valid UTF-8
// without control, format (bidi, zero-width) or separator characters or
// backslashes, relative, without empty,
// "." or ".." elements, and round-trips; BelongsTo holds only for keys
// that start with <kind>/<collection>/<partition>/<segment>/.
func FuzzParseObjectKey(f *testing.F) {
	for _, s := range []string{"insert_log/100/1/5/100/7", "../x", "/a", "a\x00", "manifest/100/1/5/manifest-1", "index_files/40/1/1/5/x", "a//b",
		"a\u0085b", "\u202egpj.exe", "a\u200bb", "a\u2066b", "a\ufeffb", "stats_log/100/1/5/é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		k, err := ParseObjectKey(key)
		if err != nil {
			return
		}
		if k.String() != key || !utf8.ValidString(key) || len(key) > MaxManifestFileBytes || strings.HasPrefix(key, "/") {
			t.Fatalf("accepted %q", key)
		}
		for _, e := range strings.Split(key, "/") {
			if e == "" || e == "." || e == ".." {
				t.Fatalf("accepted %q with element %q", key, e)
			}
		}
		for _, c := range key {
			if c < 0x20 || c == 0x7f || c == '\\' || unicode.In(c, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
				t.Fatalf("accepted %q with %U", key, c)
			}
		}
		elems := strings.Split(key, "/")
		if k.BelongsTo(100, 1, 5) && (len(elems) < 5 || elems[1] != "100" || elems[2] != "1" || elems[3] != "5") {
			t.Fatalf("%q belongs to segment 5", key)
		}
		if _, _, rev := ParseManifestKey(key); rev && k.BelongsTo(100, 1, 5) {
			t.Fatalf("revision %q counted as a file", key)
		}
	})
}

// TestStatsKeyNames (probe L13, L12): a stats key's name is 1..256 bytes
// wherever it is checked (a catalog mutation in Apply, a revision the
// leader writes), and refuses the characters object keys refuse.
func TestStatsKeyNames(t *testing.T) {
	for key, want := range map[string]string{
		"bloom_filter":                          "",
		"text:101":                              "",
		strings.Repeat("k", MaxStatsKeyBytes):   "",
		"":                                      "1..256 bytes, got 0",
		strings.Repeat("k", MaxStatsKeyBytes+1): "1..256 bytes, got 257",
		strings.Repeat("k", 900_000):            "1..256 bytes, got 900000",
		"bloom\u0085":                           "invisible character",
		"\u202ebloom":                           "invisible character",
		"bl\u200doom":                           "invisible character",
		"a\\b":                                  "backslash",
		"/abs":                                  "absolute",
	} {
		err := ValidateStatsKey(key)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateStatsKey(%.40q): %v, want %q", key, err, want)
		}
	}
}
