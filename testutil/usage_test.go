package testutil

import (
	"runtime"
	"testing"
)

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

// TestLiveHeapSeesRetainedMemory: 64 MiB kept alive shows up in LiveHeap.
func TestLiveHeapSeesRetainedMemory(t *testing.T) {
	before := LiveHeap()
	keep := make([]byte, 64<<20)
	for i := range keep {
		keep[i] = byte(i)
	}
	if after := LiveHeap(); after < before+60<<20 {
		t.Fatalf("LiveHeap %d then %d with 64 MiB retained", before, after)
	}
	runtime.KeepAlive(keep)
}
