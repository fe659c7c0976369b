package flush

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/testutil"
)

// TestRunRestsAfterACostlyRound: a round that took a second (the fake
// clock moves while it proposes) is followed by ten seconds without a
// round, even when a time-tick report asks for one; then the round runs.
// Without the pacing, time-tick reports arriving many times a second run
// full rounds back to back at Milvus-max's state size.
func TestRunRestsAfterACostlyRound(t *testing.T) {
	cfg := small
	cfg.Interval = time.Hour // rounds only on reports
	m, l, clock := fixture(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := m.AssignSegmentID(ctx, node1, []AssignRequest{req(vch0, 2, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.AssignSegmentID(ctx, node2, []AssignRequest{req(vch1, 2, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second) // past the first expiry period
	if _, err := m.Round(ctx, 2); err != nil {
		t.Fatal(err)
	}
	state := func(id int64) logpb.SegmentState { g, _ := l.State().Segment(id); return g.State }
	if state(a[0].SegmentID) != logpb.SegmentState_SEGMENT_SEALED || state(b[0].SegmentID) != logpb.SegmentState_SEGMENT_SEALED {
		t.Fatalf("segments %s, %s; want both sealed", state(a[0].SegmentID), state(b[0].SegmentID))
	}
	defer controllertest.RunRoutine(t, l, m.Run, 2)()
	controllertest.WaitForTimers(t, clock, 1) // the ticker

	tick := func(id int64, exp uint64) uint64 { g, _ := l.State().Segment(id); return max(g.SealTs, exp) }
	l.SetBeforePropose(func(body proto.Message) error {
		if _, ok := body.(*logpb.MarkSegmentsFlushing); ok {
			clock.Advance(time.Second) // this round "took" a second
		}
		return nil
	})
	if _, _, err := m.ReportTimeTicks(node1, []TimeTick{{vch0, 2, tick(a[0].SegmentID, a[0].ExpireTs)}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the first segment to become Flushing", func() bool {
		return state(a[0].SegmentID) == logpb.SegmentState_SEGMENT_FLUSHING
	})
	l.SetBeforePropose(nil)

	if _, _, err := m.ReportTimeTicks(node2, []TimeTick{{vch1, 2, tick(b[0].SegmentID, b[0].ExpireTs)}}); err != nil {
		t.Fatal(err)
	}
	controllertest.WaitForTimers(t, clock, 2) // the ticker and the rest
	clock.Advance(9 * time.Second)
	controllertest.WaitForTimers(t, clock, 2) // still resting
	if s := state(b[0].SegmentID); s != logpb.SegmentState_SEGMENT_SEALED {
		t.Fatalf("second segment %s during the rest, want still sealed", s)
	}
	clock.Advance(time.Second)
	testutil.Eventually(t, "the second segment to become Flushing after the rest", func() bool {
		return state(b[0].SegmentID) == logpb.SegmentState_SEGMENT_FLUSHING
	})
}
