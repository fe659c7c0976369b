package allocator

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coordd/coordd/controller/controllertest"
)

// TestIDsConcurrentCallersAcrossRefillsAndTerms: 64 callers at once (W1's
// alloc-id), a small batch so that they cross many windows (lock-free
// takes, moves to the prefetched window, synchronous reservations) and a
// new term midway. Every ID handed out is unique, below what raft
// reserved, and IDs increase in real-time order: a call that began after
// another ended got higher IDs.
func TestIDsConcurrentCallersAcrossRefillsAndTerms(t *testing.T) {
	const callers, calls = 64, 200
	l := controllertest.NewLeader(t, controllertest.NewClock(), 2)
	ids := NewIDs(l, 50)
	type op = handout
	var clock atomic.Uint64    // orders call starts and ends
	var switched atomic.Uint64 // clock once term 3 is established
	results := make([][]op, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				count := uint32(1 + (c+i)%7)
				if i%50 == 49 {
					count = 60 // more than a batch
				}
				start := clock.Add(1)
				first, err := ids.Alloc(context.Background(), count)
				end := clock.Add(1)
				if err != nil {
					// Only a call that began before the new term was
					// established may fail (its term changed under it).
					if s := switched.Load(); s != 0 && start > s {
						t.Errorf("call began after the term change (start %d, switch %d, term now %d): %v", start, s, l.EstablishedTerm(), err)
					}
					continue
				}
				results[c] = append(results[c], op{start, end, first, first + uint64(count) - 1})
			}
		})
		if c == callers/2 {
			l.Establish(t, 3)
			switched.Store(clock.Add(1))
		}
	}
	wg.Wait()
	var all []op
	for _, r := range results {
		all = append(all, r...)
	}
	if len(all) < callers*calls/2 {
		t.Fatalf("only %d of %d calls succeeded", len(all), callers*calls)
	}
	reserved := l.State().NextID()
	byFirst := append([]op(nil), all...)
	sort.Slice(byFirst, func(i, j int) bool { return byFirst[i].first < byFirst[j].first })
	for i, o := range byFirst {
		if o.last >= reserved {
			t.Fatalf("ids %d..%d handed out, but only ids below %d were reserved", o.first, o.last, reserved)
		}
		if i > 0 && o.first <= byFirst[i-1].last {
			t.Fatalf("ids %d..%d and %d..%d overlap", byFirst[i-1].first, byFirst[i-1].last, o.first, o.last)
		}
	}
	checkRealTimeOrder(t, "id", all)
}
