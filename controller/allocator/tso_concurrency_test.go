package allocator

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
)

// TestTSOConcurrentCallersAcrossExtensionsAndTerms: 64 callers at once
// (W1's alloc-ts) on the real clock with a 5 ms window, so that they
// cross many extensions (by the leader routine and by callers at the
// limit) and use up milliseconds, and a new term midway. Every timestamp
// is unique, below the limit raft had committed when its call returned,
// and timestamps increase in real-time order.
func TestTSOConcurrentCallersAcrossExtensionsAndTerms(t *testing.T) {
	const callers, calls = 64, 150
	clk := clockwork.NewRealClock()
	l := controllertest.NewLeader(t, clk, 2)
	tso := NewTSO(l, TSOConfig{Window: 5 * time.Millisecond, Clock: clk})
	routine := func(term uint64) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); tso.Run(ctx, term, l) }()
		return func() { cancel(); <-done }
	}
	stop := routine(2)
	type op struct {
		start, end  uint64
		first, last uint64
		limitMs     int64 // committed when the call returned
	}
	var clock atomic.Uint64
	var switching atomic.Bool // set before the term changes
	results := make([][]op, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range calls {
				count := uint32(1 + (c*7+i*13)%3000)
				start := clock.Add(1)
				first, err := tso.Alloc(l.Deadline(), count)
				end := clock.Add(1)
				if err != nil {
					// A call of the old term may fail, and one of the new
					// term that meets it in the allocator (it closes the
					// window it finds); nothing else may.
					if switching.Load() {
						continue
					}
					t.Errorf("call failed before the term change: %v", err)
					return
				}
				results[c] = append(results[c], op{start, end, first, first + uint64(count) - 1, l.State().TSOLimitPhysicalMs()})
			}
		})
		if c == callers/2 {
			switching.Store(true)
			stop()
			l.Establish(t, 3)
			stop = routine(3)
		}
	}
	wg.Wait()
	stop()
	var all []op
	for _, r := range results {
		all = append(all, r...)
	}
	if len(all) < callers*calls/2 {
		t.Fatalf("only %d of %d calls succeeded", len(all), callers*calls)
	}
	if n := len(controllertest.AppliedOf[*logpb.ExtendTSOWindow](l)); n < 4 {
		t.Fatalf("%d window extensions; the test wants callers to cross several", n)
	}
	byFirst := append([]op(nil), all...)
	sort.Slice(byFirst, func(i, j int) bool { return byFirst[i].first < byFirst[j].first })
	for i, o := range byFirst {
		if p, _ := ParseTS(o.last); p >= o.limitMs {
			t.Fatalf("timestamp at %d ms handed out with the committed limit at %d ms", p, o.limitMs)
		}
		if _, lg := ParseTS(o.first); lg+int64(o.last-o.first) >= maxLogical {
			t.Fatalf("timestamps %d..%d cross a millisecond", o.first, o.last)
		}
		if i > 0 && o.first <= byFirst[i-1].last {
			t.Fatalf("timestamps %d..%d and %d..%d overlap", byFirst[i-1].first, byFirst[i-1].last, o.first, o.last)
		}
	}
	handouts := make([]handout, len(all))
	for i, o := range all {
		handouts[i] = handout{o.start, o.end, o.first, o.last}
	}
	checkRealTimeOrder(t, "timestamp", handouts)
}
