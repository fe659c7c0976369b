package raftnode

import (
	"time"

	"golang.org/x/sys/unix"
)

// leaseClock is the lease's clock: CLOCK_BOOTTIME, which, unlike Go's
// monotonic clock (CLOCK_MONOTONIC), keeps counting while the system is
// suspended. A leader whose host was suspended therefore finds its lease
// over on resume, while its followers' timers ran on. It does not see a VM
// pause that stops the guest's clocks altogether (docs/operations.md).
func leaseClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Every Linux since 2.6.39 has it; without it, no lease is safe.
		panic("raftnode: CLOCK_BOOTTIME: " + err.Error())
	}
	return time.Duration(ts.Nano())
}
