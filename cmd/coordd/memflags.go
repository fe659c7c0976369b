package main

import (
	"flag"
	"fmt"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/vocab"
)

// The Go collector's memory limit (docs/operations.md#memory-limit).
//
// With the runtime's default (GOGC=100, no limit) the heap may grow to
// twice the live heap before a collection, so a member holding a
// Milvus-max state (about 1.2 GiB live at 1M segments) reaches 2.4-2.8 GiB
// of RSS. A soft limit makes the collector run earlier as the heap nears
// it, trading CPU for memory only when memory is short.

const (
	// cgroupLimitShare: under a cgroup memory limit the default soft limit
	// is this share of it, leaving room for what the runtime does not
	// count (stacks of blocked goroutines, the page cache is not ours).
	cgroupLimitShareNum, cgroupLimitShareDen = 9, 10
	// minMemoryLimit refuses a limit the runtime itself would not fit in.
	minMemoryLimit = 64 << 20
)

// defaultMemoryLimit is --memory-limit's default: 9/10 of the cgroup's
// memory.max when there is one, else 0 (the runtime's own setting: the
// GOMEMLIMIT environment variable if set, no limit otherwise).
func defaultMemoryLimit() int64 { return memoryLimitFor(cgroupMemoryMax()) }

func memoryLimitFor(cgroupMax int64) int64 {
	if cgroupMax <= 0 || cgroupMax == 1<<62 {
		return 0
	}
	return cgroupMax / cgroupLimitShareDen * cgroupLimitShareNum
}

// memoryLimitFlag is --memory-limit: bytes with an optional unit, at least
// minMemoryLimit, or 0.
type memoryLimitFlag struct{ p *int64 }

func (f memoryLimitFlag) String() string { return byteSizeFlag(f).String() }

func (f memoryLimitFlag) Set(s string) error {
	var n int64
	if err := (byteSizeFlag{&n}).Set(s); err != nil {
		return err
	}
	if n != 0 && n < minMemoryLimit {
		return fmt.Errorf("%s is below %s, too little for the Go runtime itself (0: leave the runtime's setting)", s, vocab.FormatBytes(minMemoryLimit))
	}
	*f.p = n
	return nil
}

func registerMemoryLimit(fs *flag.FlagSet, limit *int64) {
	*limit = defaultMemoryLimit()
	fs.Var(memoryLimitFlag{limit}, "memory-limit",
		"soft memory limit for the Go collector (units allowed: 1800MiB, 4GiB): near it the collector runs more often instead of letting the heap "+
			"double; 0: the runtime's own (GOMEMLIMIT if set, else none); default 9/10 of the cgroup's memory.max when there is one, else 0 "+
			"(docs/operations.md#memory-limit)")
}

// applyMemoryLimit sets the collector's soft limit when one is configured
// and says what it is and how it relates to the state budget: a heap holds
// about twice the state's encoded size, so a limit under twice the budget
// lets the state grow past what the collector can keep under the limit.
func applyMemoryLimit(limit, stateBudget int64, logger hclog.Logger) {
	if limit <= 0 {
		return
	}
	debug.SetMemoryLimit(limit)
	logger.Info("Go collector memory limit set", "memory-limit", vocab.FormatBytes(limit))
	if stateBudget <= 0 || limit < 2*stateBudget {
		logger.Warn("--memory-limit is under twice --state-budget: the state may grow past what fits under the limit, and the collector will then run nearly continuously (docs/operations.md#memory-limit)",
			"memory-limit", vocab.FormatBytes(limit), "state-budget", vocab.FormatBytes(stateBudget))
	}
}
