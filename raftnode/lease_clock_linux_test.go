package raftnode

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLeaseClockCountsSuspend: the lease reads CLOCK_BOOTTIME, the clock
// that keeps counting across a system suspend (Go's monotonic clock,
// CLOCK_MONOTONIC, does not), so a leader resumed from a suspend finds its
// lease over.
func TestLeaseClockCountsSuspend(t *testing.T) {
	boot := func() time.Duration {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ts.Nano())
	}
	l := newLeaderLease(time.Second)
	a := l.now()
	b := boot()
	c := l.now()
	if a > b || b > c {
		t.Fatalf("lease clock %v, %v around CLOCK_BOOTTIME %v: not the same clock", a, c, b)
	}
}

func BenchmarkLeaseClock(b *testing.B) {
	for b.Loop() {
		leaseClock()
	}
}
