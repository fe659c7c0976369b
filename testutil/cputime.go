package testutil

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time (user + system, every thread) this process has
// used so far. On a machine shared with other work, the CPU time a step
// takes varies far less than its wall time, so benchmarks report both.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
