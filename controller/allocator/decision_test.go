package allocator

import (
	"context"
	"testing"
	"time"
)

// TestAllocatorProposalsCarryTheirTerm: every window extension and ID
// reservation is proposed as a decision of the term the allocator served
// in, so a newer leader's establishment fences it in Apply.
func TestAllocatorProposalsCarryTheirTerm(t *testing.T) {
	l := newFakeLeader(4)
	clk := &fakeClock{now: time.UnixMilli(1_000_000)}
	tso, ids := NewTSO(l, TSOConfig{Window: 3 * time.Second, Now: clk.Now}), NewIDs(l, 10)
	ctx := context.Background()
	if _, err := tso.Alloc(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Alloc(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := tso.Refresh(ctx, 4); err != nil {
		t.Fatal(err)
	}
	clk.Add(10 * time.Second)
	if err := tso.Refresh(ctx, 4); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.proposals) < 3 {
		t.Fatalf("only %d proposals; the test needs extensions and a reservation", len(l.proposals))
	}
	for i, term := range l.decisionTerms {
		if term != 4 {
			t.Errorf("proposal %d (%T) carried decision term %d, want 4", i, l.proposals[i], term)
		}
	}
}
