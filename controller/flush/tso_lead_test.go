package flush

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/allocator"
	"github.com/coordd/coordd/fsm"
)

// O1: after a failover the new leader's TSO starts at the committed limit,
// up to a window ahead of its clock. An allocation's ExpireTs is measured
// on the TSO, so a fresh timestamp taken right after the allocation is
// still below it and the insert can use the allocation.
func TestAuditFailoverTSOLeadOutrunsAllocations(t *testing.T) {
	_, l, clock := bareFixture(t, Config{})
	l.MustPropose(t, &logpb.ExtendTSOWindow{LimitPhysicalMs: clock.Now().UnixMilli() + 2500}) // the predecessor's limit
	tso := allocator.NewTSO(l, allocator.TSOConfig{Clock: clock})
	m := New(l, tso, clock, Config{})
	as, err := m.AssignSegmentID(context.Background(), node1, []AssignRequest{req(vch0, 2, 16)})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tso.Alloc(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if ts >= as[0].ExpireTs {
		t.Errorf("fresh timestamp %d (%v ahead of the clock) is at or past the new allocation's ExpireTs %d: an insert cannot use it",
			ts, time.Duration(fsm.PhysicalMs(ts)-clock.Now().UnixMilli())*time.Millisecond, as[0].ExpireTs)
	}
	// The allocation stays usable for AllocationExpiry of TSO time, and
	// its wall-clock expiry (the flush gate's) is unchanged.
	if got, want := fsm.PhysicalMs(as[0].ExpireTs), fsm.PhysicalMs(ts)+m.Config().AllocationExpiry.Milliseconds(); got < want {
		t.Errorf("ExpireTs at %d ms, want at least %d ms", got, want)
	}
	if !as[0].Expire.Equal(clock.Now().Add(m.Config().AllocationExpiry)) {
		t.Errorf("wall-clock expiry %v, want now + %v", as[0].Expire, m.Config().AllocationExpiry)
	}
	// With the window open, the same holds from the oracle's position.
	as, err = m.AssignSegmentID(context.Background(), node1, []AssignRequest{req(vch0, 2, 16)})
	if err != nil {
		t.Fatal(err)
	}
	if next, _ := tso.Alloc(context.Background(), 1); next >= as[0].ExpireTs || fsm.PhysicalMs(as[0].ExpireTs) < fsm.PhysicalMs(next)+m.Config().AllocationExpiry.Milliseconds() {
		t.Errorf("open window: fresh timestamp %d, ExpireTs %d", next, as[0].ExpireTs)
	}
}
