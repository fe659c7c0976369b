package commands

import (
	"strings"
	"testing"
)

// referenceParsePointer is ParseManifestPointer with encoding/json only
// (the implementation before the canonical fast path).
func referenceParsePointer(s string) (ManifestPointer, error) {
	if s == "" {
		return ManifestPointer{}, nil
	}
	if len(s) > MaxManifestPathBytes {
		return ManifestPointer{}, invalid("manifest pointer is %d bytes (max %d)", len(s), MaxManifestPathBytes)
	}
	return parsePointerJSON(s)
}

var pointerSamples = []string{
	"",
	`{"ver":1,"base_path":"manifest/100/1/7"}`,
	`{"ver":0,"base_path":"manifest/100/1/7"}`,
	`{"ver":9223372036854775807,"base_path":"a"}`,
	`{"ver":9223372036854775808,"base_path":"a"}`,
	`{"ver":-1,"base_path":"a"}`,
	`{"ver":01,"base_path":"a"}`,
	`{"ver":1.0,"base_path":"a"}`,
	`{"ver":1e2,"base_path":"a"}`,
	`{"ver":,"base_path":"a"}`,
	`{"ver":1,"base_path":""}`,
	`{"ver":1,"base_path":"a//b"}`,
	`{"ver":1,"base_path":"a/../b"}`,
	`{"ver":1,"base_path":"/a"}`,
	`{"ver":1,"base_path":"a\\b"}`,
	`{"ver":1,"base_path":"a\u0026b"}`,
	`{"ver":1,"base_path":"a&b"}`,
	`{"ver":1,"base_path":"a<b>"}`,
	`{"ver":1,"base_path":"a\"b"}`,
	`{"ver":1,"base_path":"é/x"}`,
	"{\"ver\":1,\"base_path\":\"a\x01\"}",
	"{\"ver\":1,\"base_path\":\"a\xff\"}",
	`{"ver":1,"base_path":"a"} `,
	`{"ver":1,"base_path":"a"}{}`,
	`{"ver":1,"base_path":"a"}x`,
	`{"ver":1, "base_path":"a"}`,
	`{"base_path":"a","ver":1}`,
	`{"VER":1,"base_path":"a"}`,
	`{"ver":1,"base_path":"a","x":1}`,
	`{"ver":1,"base_path":"a","ver":2}`,
	`{"ver":1}`,
	`{"ver":1,"base_path":null}`,
	`{"ver":1,"base_path":"a"`,
	`{"ver":1,"base_path":"` + strings.Repeat("a", MaxManifestBaseBytes+1) + `"}`,
	`{"ver":1,"base_path":"` + strings.Repeat("a", MaxManifestPathBytes) + `"}`,
	`null`,
	`[]`,
}

// checkPointerParse: the fast path's answer is the reference's, error
// text included.
func checkPointerParse(t *testing.T, s string) {
	t.Helper()
	got, gerr := ParseManifestPointer(s)
	want, werr := referenceParsePointer(s)
	if got != want || (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
		t.Fatalf("ParseManifestPointer(%q) = %+v, %v; encoding/json: %+v, %v", s, got, gerr, want, werr)
	}
}

// checkPointerString: String writes what encoding/json writes.
func checkPointerString(t *testing.T, p ManifestPointer) {
	t.Helper()
	want := ""
	if !p.IsZero() {
		want = p.marshalJSON()
	}
	if got := p.String(); got != want {
		t.Fatalf("%+v.String() = %q, encoding/json: %q", p, got, want)
	}
}

func TestCanonicalPointerMatchesJSON(t *testing.T) {
	for _, s := range pointerSamples {
		checkPointerParse(t, s)
	}
	for _, b := range []string{"", "manifest/1/2/3", "a&b", "a<b", "a>b", `a"b`, `a\b`, "a\x00", "a\x7f", "é", "\xff", "a\u2028b", "~ !#$%'()*+,-./:;=?@[]^_`{|}"} {
		for _, v := range []int64{0, 1, 42, -7, 1 << 62, -1 << 63} {
			checkPointerString(t, ManifestPointer{Base: b, Version: v})
		}
	}
}

// A pointer String wrote parses back to itself (the round trip every
// stored pointer makes).
func TestCanonicalPointerRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 9, 10, 1234567890123} {
		p := ManifestPointer{Base: ManifestBase(100, 1, 7), Version: v}
		s := p.String()
		if _, ok := parseCanonicalPointer(s); !ok {
			t.Fatalf("%q is not read as canonical", s)
		}
		got, err := ParseManifestPointer(s)
		if err != nil || got != p {
			t.Fatalf("ParseManifestPointer(%q) = %+v, %v; want %+v", s, got, err, p)
		}
	}
}

func FuzzCanonicalPointer(f *testing.F) {
	for _, s := range pointerSamples {
		f.Add(s, int64(3))
	}
	f.Fuzz(func(t *testing.T, s string, v int64) {
		checkPointerParse(t, s)
		checkPointerString(t, ManifestPointer{Base: s, Version: v})
		if p := (ManifestPointer{Base: s, Version: v}); !p.IsZero() {
			checkPointerParse(t, p.String())
		}
	})
}

// go test -tags hashicorpmetrics -run '^$' -bench Pointer -benchmem ./commands/
func BenchmarkParseManifestPointer(b *testing.B) {
	s := ManifestPointer{Base: ManifestBase(451234567890, 451234567891, 451234567999), Version: 12}.String()
	b.Run("canonical", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseManifestPointer(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := referenceParsePointer(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkManifestPointerString(b *testing.B) {
	p := ManifestPointer{Base: ManifestBase(451234567890, 451234567891, 451234567999), Version: 12}
	b.Run("canonical", func(b *testing.B) {
		for b.Loop() {
			_ = p.String()
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			_ = p.marshalJSON()
		}
	})
}
