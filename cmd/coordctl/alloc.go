package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/coordd/coordd/client"
)

var allocGroup = &group{
	name:    "alloc",
	summary: "allocate timestamps and IDs",
	cmds: []*command{
		{name: "ts", args: "N", summary: "allocate N consecutive hybrid timestamps (physical ms << 18 | logical)", bind: bindAlloc(true)},
		{name: "id", args: "N", summary: "allocate N consecutive, never reused IDs", bind: bindAlloc(false)},
	},
}

// logicalBits is the width of the logical part of a hybrid timestamp.
const logicalBits = 18

func bindAlloc(ts bool) func(*flag.FlagSet) func([]string) (action, error) {
	return func(*flag.FlagSet) func([]string) (action, error) {
		return func(args []string) (action, error) {
			n, err := oneArg(args, "N", parseCount)
			if err != nil {
				return action{}, err
			}
			what, alloc := "alloc id", (*client.Client).AllocID
			if ts {
				what, alloc = "alloc ts", (*client.Client).AllocTimestamp
			}
			return action{what: what, run: func(ctx context.Context, e *env) error {
				first, count, err := alloc(e.c, ctx, n)
				if err != nil {
					return err
				}
				return printAlloc(e, ts, first, count)
			}}, nil
		}
	}
}

// parseCount accepts a decimal integer in 1..client.MaxAllocCount.
func parseCount(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 || n > client.MaxAllocCount {
		//lint:ignore ST1005 N is the argument's name in the usage text
		return 0, fmt.Errorf("N must be an integer in 1..%d, got %q", client.MaxAllocCount, s)
	}
	return uint32(n), nil
}

func printAlloc(e *env, ts bool, first uint64, count uint32) error {
	vals := make([]uint64, count)
	for i := range vals {
		vals[i] = first + uint64(i)
	}
	return e.show(allocJSON{First: first, Count: count, Values: vals}, func(w io.Writer) error {
		last := first + uint64(count) - 1
		tw := newTable(w)
		if ts {
			fmt.Fprintln(tw, "FIRST\tLAST\tCOUNT\tPHYSICAL (FIRST)\tLOGICAL (FIRST)")
			phys := time.UnixMilli(int64(first >> logicalBits)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
			fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\n", first, last, count, phys, first&(1<<logicalBits-1))
		} else {
			fmt.Fprintln(tw, "FIRST\tLAST\tCOUNT")
			fmt.Fprintf(tw, "%d\t%d\t%d\n", first, last, count)
		}
		return tw.Flush()
	})
}
