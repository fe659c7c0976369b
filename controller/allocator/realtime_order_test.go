package allocator

import (
	"sort"
	"testing"
)

// handout is one allocation call: the range it got and when it ran, as
// ticks of a counter that orders every call's start and end.
type handout struct{ start, end, first, last uint64 }

// checkRealTimeOrder fails t when a call that began after other calls had
// ended got a value at or below the highest those calls got: what was
// handed out before a call starts must be below everything it gets.
func checkRealTimeOrder(t *testing.T, what string, calls []handout) {
	t.Helper()
	byStart := append([]handout(nil), calls...)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].start < byStart[j].start })
	byEnd := append([]handout(nil), calls...)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end < byEnd[j].end })
	var ended int
	var highest uint64
	for _, o := range byStart {
		for ; ended < len(byEnd) && byEnd[ended].end < o.start; ended++ {
			highest = max(highest, byEnd[ended].last)
		}
		if ended > 0 && o.first <= highest {
			t.Fatalf("a call that began after calls ended with %s %d got %d..%d", what, highest, o.first, o.last)
		}
	}
}
