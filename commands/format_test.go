package commands

import (
	"strconv"
	"strings"
	"testing"
)

// The fingerprint is stable across calls (no map-order leak) and names the
// registry's size.
func TestLogFormatStable(t *testing.T) {
	a, b := LogFormat(), LogFormat()
	if a != b {
		t.Fatalf("LogFormat differs between calls: %q vs %q", a, b)
	}
	if !strings.HasPrefix(a, strconv.Itoa(len(registry))+" command types, fingerprint ") {
		t.Fatalf("LogFormat = %q", a)
	}
}
