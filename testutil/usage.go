package testutil

import (
	"runtime"
	"syscall"
	"time"
)

// LiveHeap is the heap still reachable after a full collection (bytes):
// what a state costs in memory, without the garbage around it.
func LiveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

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
