package fsm

import (
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// RaiseAllocatorFloors (written by `coordd restore`) only ever raises the
// next ID and the TSO limit; a zero or lower floor leaves the value.
func TestApplyRaiseAllocatorFloors(t *testing.T) {
	s := build(t, reserveIDs(10), extendTSO(5000))
	s, _ = mustApply(t, s, cmd(&logpb.RaiseAllocatorFloors{NextId: 1 << 40, TsoLimitPhysicalMs: 9000}))
	if s.NextID() != 1<<40 || s.TSOLimitPhysicalMs() != 9000 {
		t.Fatalf("next id %d, tso limit %d", s.NextID(), s.TSOLimitPhysicalMs())
	}
	s, _ = mustApply(t, s, cmd(&logpb.RaiseAllocatorFloors{NextId: 5, TsoLimitPhysicalMs: 0}))
	if s.NextID() != 1<<40 || s.TSOLimitPhysicalMs() != 9000 {
		t.Fatalf("lowered: next id %d, tso limit %d", s.NextID(), s.TSOLimitPhysicalMs())
	}
	_, res := mustApply(t, s, cmd(&logpb.RaiseAllocatorFloors{}))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_INVALID), "needs a next id or a tso limit")
	_, res = mustApply(t, s, reserveIDs(3))
	if res[0].GetIdRange().GetFirst() != 1<<40 {
		t.Fatalf("first reservation after the floor: %v", res[0])
	}
}
