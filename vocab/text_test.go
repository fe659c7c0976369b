package vocab

import "testing"

func TestIsInvisible(t *testing.T) {
	for _, r := range []rune{0, '\n', 0x1b, 0x7f, 0x80, 0x85, 0x9f, 0xad, 0x61c, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f,
		0x2028, 0x2029, 0x202a, 0x202e, 0x2060, 0x2066, 0x2069, 0xfeff} {
		if !IsInvisible(r) {
			t.Errorf("%U is not refused", r)
		}
	}
	for _, r := range []rune{' ', 'a', '/', ':', '~', 0xa0, 0xe9, 0x4e2d, 0x1f600} {
		if IsInvisible(r) {
			t.Errorf("%U is refused", r)
		}
	}
	if r, ok := FirstInvisible("abc\u202egpj.exe"); !ok || r != 0x202e {
		t.Errorf("FirstInvisible: %U %v", r, ok)
	}
	if _, ok := FirstInvisible("bloom_filter/text:101"); ok {
		t.Error("a plain name has an invisible character")
	}
}
