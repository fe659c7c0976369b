package vocab

import (
	"errors"
	"testing"
)

func TestFormatBytes(t *testing.T) {
	for b, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 6 << 10: "6.0 KiB",
		3 << 29: "1.5 GiB", 1 << 40: "1.0 TiB"} {
		if got := FormatBytes(b); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", b, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "1500": 1500, "512MiB": 512 << 20, "2GiB": 2 << 30, "4GB": 4e9,
		"64 KiB": 64 << 10, "10B": 10, "1TiB": 1 << 40} {
		if got, err := ParseBytes(s); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "-1", "1.5GiB", "GiB", "12 parsecs", "9999999999TiB", "0x10"} {
		if _, err := ParseBytes(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseBytes(%q) = %v; want ErrInvalid", s, err)
		}
	}
}
