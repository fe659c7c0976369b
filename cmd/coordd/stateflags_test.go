package main

import (
	"strings"
	"testing"
)

func TestParseMemTotal(t *testing.T) {
	for text, want := range map[string]int64{
		"MemTotal:       24683748 kB\nMemFree:         1000 kB\n": 24683748 << 10,
		"MemFree:         1000 kB\nMemTotal: 2048 kB\n":           2 << 20,
		"MemFree:         1000 kB\n":                              1 << 62,
		"MemTotal: lots kB\n":                                     1 << 62,
		"":                                                        1 << 62,
	} {
		if got := parseMemTotal(strings.NewReader(text)); got != want {
			t.Errorf("parseMemTotal(%q) = %d, want %d", text, got, want)
		}
	}
}

// The default budget is an eighth of the memory the process may use, or
// the fallback where that cannot be read.
func TestDefaultStateBudget(t *testing.T) {
	got := defaultStateBudget()
	mem := min(memTotal(), cgroupMemoryMax())
	want := int64(fallbackStateBudget)
	if mem != 1<<62 {
		want = mem / stateBudgetShare
	}
	if got != want || got <= 0 {
		t.Fatalf("defaultStateBudget = %d, want %d (memory %d)", got, want, mem)
	}
}
