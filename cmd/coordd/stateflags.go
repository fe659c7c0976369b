package main

import (
	"bufio"
	"flag"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/coordd/coordd/vocab"
)

// The memory guard's flag (docs/operations.md#memory-guard).

const (
	// stateBudgetShare: the default budget is this fraction of the
	// machine's memory. The budget counts the state's encoded bytes; a
	// member's heap holds about twice that, the collector lets it grow to
	// about twice the live heap, and a snapshot install holds a second
	// state while it is read, so a state at the budget needs about 4–8
	// budgets of memory at its peak.
	stateBudgetShare = 8
	// fallbackStateBudget is the default where the machine's memory
	// cannot be read (not Linux).
	fallbackStateBudget = 1 << 30
)

// defaultStateBudget is --state-budget's default: an eighth of the memory
// this process may use (the smaller of the machine's MemTotal and its
// cgroup's memory.max), fallbackStateBudget when neither can be read.
func defaultStateBudget() int64 {
	mem := min(memTotal(), cgroupMemoryMax())
	if mem <= 0 || mem == 1<<62 {
		return fallbackStateBudget
	}
	return mem / stateBudgetShare
}

// memTotal is /proc/meminfo's MemTotal in bytes, 1<<62 when unknown.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 1 << 62
	}
	defer f.Close()
	return parseMemTotal(f)
}

// parseMemTotal reads MemTotal from /proc/meminfo's text
// ("MemTotal:       24683748 kB"), 1<<62 when it has none.
func parseMemTotal(r io.Reader) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return 1 << 62
}

// cgroupMemoryMax is the cgroup v2 memory limit in bytes, 1<<62 when
// there is none ("max") or it cannot be read.
func cgroupMemoryMax() int64 {
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 1 << 62
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 1 << 62
	}
	return n
}

// byteSizeFlag is a flag.Value of bytes with an optional unit
// (vocab.ParseBytes).
type byteSizeFlag struct{ p *int64 }

func (f byteSizeFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strconv.FormatInt(*f.p, 10)
}

func (f byteSizeFlag) Set(s string) error {
	n, err := vocab.ParseBytes(s)
	if err != nil {
		return err
	}
	*f.p = n
	return nil
}

// registerStateBudget registers --state-budget into *budget, defaulting it
// to defaultStateBudget.
func registerStateBudget(fs *flag.FlagSet, budget *int64) {
	*budget = defaultStateBudget()
	fs.Var(byteSizeFlag{budget}, "state-budget",
		"the memory guard: once the state's estimated encoded size reaches this many bytes (units allowed: 512MiB, 4GiB), commands that grow it "+
			"(new collections, segments, broadcasts other than drops and flushes, tokens) are refused with ResourceExhausted (HTTP 429) while drops, "+
			"flushes, checkpoints and acks still work; 0: off; default an eighth of the machine's memory (docs/operations.md#memory-guard)")
}
