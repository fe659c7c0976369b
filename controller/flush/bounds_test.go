package flush

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/coordd/coordd/fsm"
)

// TestTimeTickBounds: the leader refuses a time tick that no TSO handed
// out (2^64-1, or past the committed limit plus the slack), as Apply
// refuses such positions, and records nothing for it.
func TestTimeTickBounds(t *testing.T) {
	m, l, _ := fixture(t, Config{})
	limit := l.State().TSOLimitPhysicalMs()
	for _, tick := range []uint64{^uint64(0), fsm.ComposeTS(limit + fsm.PositionSlackMs)} {
		acc, refused, err := m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, tick}})
		if err != nil || acc != 0 || len(refused) != 1 {
			t.Fatalf("tick %d: accepted %d refused %v err %v", tick, acc, refused, err)
		}
		if _, ok := m.TimeTicks()[vch0]; ok {
			t.Fatalf("tick %d was recorded", tick)
		}
	}
	if acc, refused, _ := m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, fsm.ComposeTS(limit+fsm.PositionSlackMs) - 1}}); acc != 1 || len(refused) != 0 {
		t.Fatalf("the largest tick in bounds: accepted %d refused %v", acc, refused)
	}
}

// TestAssignSizeBounds: an allocation of more than MaxInt64 rows or bytes
// is invalid, and the sizes a segment's allocations add up to stop at
// MaxInt64 instead of wrapping negative (which would make a full segment
// look empty).
func TestAssignSizeBounds(t *testing.T) {
	m, _, _ := fixture(t, Config{})
	ctx := context.Background()
	for _, r := range []AssignRequest{{CollectionID: coll, PartitionID: 1, VChannel: vch0, PChannelTerm: 2, Rows: 1, Bytes: math.MaxUint64},
		{CollectionID: coll, PartitionID: 1, VChannel: vch0, PChannelTerm: 2, Rows: math.MaxInt64 + 1, Bytes: 1}} {
		if _, err := m.AssignSegmentID(ctx, node1, []AssignRequest{r}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("rows %d bytes %d: %v, want ErrInvalid", r.Rows, r.Bytes, err)
		}
	}
	if got := addCapped(math.MaxInt64-1, math.MaxInt64); got != math.MaxInt64 {
		t.Fatalf("addCapped = %d", got)
	}
	if got := addCapped(2, 3); got != 5 {
		t.Fatalf("addCapped(2, 3) = %d", got)
	}
}
