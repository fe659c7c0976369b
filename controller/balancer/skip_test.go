package balancer

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
)

// wakeCountingLeader counts StateChanged calls: Run takes a new channel
// after every wake, so a count above n means the wake of a change made
// after the n-th call was consumed.
type wakeCountingLeader struct {
	*controllertest.Leader
	takes atomic.Int64
	// pause, if set, runs once inside the next StateChanged, after the
	// channel was taken and before it is returned.
	pause atomic.Pointer[func()]
}

func (l *wakeCountingLeader) StateChanged() <-chan struct{} {
	ch := l.Leader.StateChanged()
	if p := l.pause.Swap(nil); p != nil {
		(*p)()
	}
	l.takes.Add(1)
	return ch
}

// commitVersion publishes version v+1 of segment seg over v.
func commitVersion(l *controllertest.Leader, seg int64, base string, v int64) error {
	_, err := commands.CommitNew(context.Background(), l, &logpb.CommitSegmentManifests{Publishes: []*logpb.ManifestPublish{{SegmentId: seg,
		Base: commands.ManifestPointer{Base: base, Version: v}.String(),
		Next: commands.ManifestPointer{Base: base, Version: v + 1}.String()}}}, "")
	return err
}

// runSettled starts Run over two nodes and a collection with one segment
// (published at manifest version 1), and returns once a round changed
// nothing: Run then waits for a change.
func runSettled(t *testing.T) (h *harness, l *wakeCountingLeader, segment int64, base string) {
	t.Helper()
	h, _, _ = setupTwoNodes(t, nil)
	l = &wakeCountingLeader{Leader: h.leader}
	b, err := New(l, h.health, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.b = b
	const coll = int64(100)
	vch := h.leader.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: coll, Count: 1}).GetVchannels().GetVchannels()[0]
	h.leader.MustPropose(t, &logpb.ReserveIDs{Count: 10})
	segment, base = 5, commands.ManifestBase(coll, 1, 5)
	h.leader.MustPropose(t, &logpb.CommitSegmentManifests{Publishes: []*logpb.ManifestPublish{{SegmentId: segment,
		Next: commands.ManifestPointer{Base: base, Version: 1}.String(),
		Catalog: &logpb.ManifestCatalogMutation{NewSegment: &logpb.ManifestNewSegment{CollectionId: coll, PartitionId: 1,
			Vchannel: vch, Level: logpb.SegmentLevel_LEVEL_L1, NumOfRows: 10}}}}})
	stop := h.runBalancer()
	t.Cleanup(stop)
	h.eventually("settled", func() bool {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return h.b.quiet > 0 && h.b.lastError == ""
	})
	return h, l, segment, base
}

// An entry that touches no channel record (here a manifest commit) wakes
// Run but runs no decision: the balancer's inputs did not change.
func TestRunSkipsDecideForEntriesWithoutChannelRecords(t *testing.T) {
	h, l, seg, base := runSettled(t)
	before := h.health.Calls()
	for v := int64(1); v <= 10; v++ {
		taken := l.takes.Load()
		if err := commitVersion(h.leader, seg, base, v); err != nil {
			t.Fatal(err)
		}
		// Run consumed this wake once it takes a new channel; by then the
		// decision of the wake before (if any) has returned.
		h.eventually("the commit's wake consumed", func() bool { return l.takes.Load() > taken })
	}
	if got := h.health.Calls() - before; got != 0 {
		t.Fatalf("ten manifest commits ran decisions (%d Healthy calls), want none", got)
	}
	// The skip held the health notification: a health change still moves
	// channels.
	h.health.Set(1, false)
	h.eventually("channels off the unhealthy node", func() bool { return len(h.channelsOn(1)) == 0 })
}

// Every change of a channel record reaches a decision, also those that
// keep the assignment version (a new PChannel) and those after many
// skipped entries.
func TestRunDecidesOnEveryChannelRecordChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *harness)
		done   func(h *harness) bool
	}{
		{"new pchannel", func(h *harness) {
			h.leader.MustPropose(h.t, &logpb.AddPChannels{Pchannels: []string{pname(16)}})
		}, func(h *harness) bool {
			p, ok := h.leader.State().PChannel(pname(16))
			return ok && p.State == logpb.PChannelState_PCHANNEL_ASSIGNED
		}},
		{"drained node", func(h *harness) {
			h.leader.MustPropose(h.t, &logpb.SetStreamingNodeDrain{NodeId: 1, Draining: true})
		}, func(h *harness) bool { return len(h.channelsOn(1)) == 0 }},
		{"new node", func(h *harness) {
			calls := h.health.Calls()
			h.health.Set(3, true) // healthy before it registers: only the state wakes Run
			h.eventually("a decision on the health change", func() bool { return h.health.Calls() > calls })
			h.leader.MustPropose(h.t, &logpb.RegisterStreamingNode{Address: "10.0.0.3:1003", Incarnation: "inc-3"})
		}, func(h *harness) bool { return len(h.channelsOn(3)) > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, seg, base := runSettled(t)
			for v := int64(1); v <= 5; v++ { // skipped wakes first
				if err := commitVersion(h.leader, seg, base, v); err != nil {
					t.Fatal(err)
				}
			}
			tc.change(h)
			h.eventually(tc.name+" balanced", func() bool { return tc.done(h) })
		})
	}
}

// A health change that lands while Run skips a state wake is not lost:
// the skip keeps the health notification it had.
func TestRunSkipKeepsAPendingHealthChange(t *testing.T) {
	h, l, seg, base := runSettled(t)
	errs := make(chan error, 1)
	pause := func() {
		// Run took its next state channel while skipping the first
		// commit's wake; both changes land before it selects again.
		errs <- commitVersion(h.leader, seg, base, 2)
		h.health.Set(1, false)
	}
	l.pause.Store(&pause)
	if err := commitVersion(h.leader, seg, base, 1); err != nil {
		t.Fatal(err)
	}
	h.eventually("channels off the unhealthy node", func() bool { return len(h.channelsOn(1)) == 0 })
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
