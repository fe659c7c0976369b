package proc

import (
	"os"
	"strings"
	"testing"
)

func TestStatsOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no procfs: %v", err)
	}
	pid := os.Getpid()
	// Burn a little CPU so the figure is above zero.
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i % 7
	}
	_ = x
	cpu, err := CPUSeconds(pid)
	if err != nil || cpu <= 0 {
		t.Fatalf("CPUSeconds = %v, %v", cpu, err)
	}
	rss, err := RSSBytes(pid)
	if err != nil || rss < 1<<20 {
		t.Fatalf("RSSBytes = %d, %v", rss, err)
	}
	if stopped, err := Stopped(pid); err != nil || stopped {
		t.Fatalf("Stopped = %v, %v for a running process", stopped, err)
	}
	if la := LoadAvg(); len(strings.Fields(la)) != 3 {
		t.Fatalf("LoadAvg = %q", la)
	}
	if _, err := CPUSeconds(1 << 30); err == nil {
		t.Fatal("CPUSeconds of a process that does not exist gave no error")
	}
}
