package raftnode

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// leaseClock is the lease's clock: CLOCK_BOOTTIME, which, unlike Go's
// monotonic clock (CLOCK_MONOTONIC), keeps counting while the system is
// suspended. A leader whose host was suspended therefore finds its lease
// over on resume, while its followers' timers ran on. It does not see a VM
// pause that stops the guest's clocks altogether (docs/operations.md).
//
// Go reads its own clocks through the vDSO, but offers no vDSO call for
// CLOCK_BOOTTIME, so this is a system call on every VerifyLeader (about
// 1.5 us on a VM with costly kernel entries, bench/RESULTS.md). It is made
// raw: clock_gettime never blocks, so the scheduler need not be told, and
// that saves a tenth of its cost.
func leaseClock() time.Duration {
	var ts unix.Timespec
	if _, _, errno := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_BOOTTIME, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		// Every Linux since 2.6.39 has it; without it, no lease is safe.
		panic("raftnode: CLOCK_BOOTTIME: " + errno.Error())
	}
	return time.Duration(ts.Nano())
}
