//go:build !linux

package raftnode

import "time"

var leaseClockBase = time.Now()

// leaseClock is the lease's clock. Off Linux it is Go's monotonic clock,
// which may stop during a system suspend (docs/operations.md).
func leaseClock() time.Duration { return time.Since(leaseClockBase) }
