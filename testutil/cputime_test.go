package testutil

import "testing"

// TestCPUTimeGrows: burning CPU shows up in CPUTime.
func TestCPUTimeGrows(t *testing.T) {
	before := CPUTime()
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i % 7
	}
	if after := CPUTime(); after <= before || x == 0 {
		t.Fatalf("CPUTime did not grow: %v then %v", before, after)
	}
}
