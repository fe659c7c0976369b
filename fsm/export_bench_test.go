package fsm

import "testing"

// BenchSegmentState exposes benchSegmentState to the benchmarks of package
// fsm_test (which may import packages above fsm, such as backup).
func BenchSegmentState(tb testing.TB, n int) *State {
	s, _ := benchSegmentState(tb, n)
	return s
}
