package datapath

import (
	"slices"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// With no segments, no tick is wanted (an idle VChannel stays idle).
func TestTicksWantedEmptyState(t *testing.T) {
	got := ticksWanted(fsm.New(), []flush.TimeTick{{VChannel: "p_0_1v0", Tick: 5}})
	if !slices.Equal(got, nil) {
		t.Fatalf("ticksWanted = %v, want none", got)
	}
}

// A sealed segment whose seal time the reported tick has not passed wants
// a fresh tick from its VChannel's owner; once the tick passes it, or for
// a growing segment, nothing is wanted.
func TestTicksWantedForASealedSegment(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 3)
	pch := vocab.PChannelName("tw-dml", 0)
	l.MustPropose(t, &logpb.InitStreaming{ClusterId: "tw", Pchannels: []string{pch}})
	node := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "127.0.0.1:9", Incarnation: "i"}).GetRegisterNode().GetNodeId()
	p, _ := l.State().PChannel(pch)
	res := l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: pch, NodeId: node, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: p.Term}}})
	l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: res.GetAssign().GetAssigned()})
	l.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: 7, Count: 1})
	coll, _ := l.State().Collection(7)
	v := coll.Vchannels[0]
	term := res.GetAssign().GetAssigned()[0].Term
	seg := l.MustPropose(t, &logpb.CreateSegment{CollectionId: 7, PartitionId: 1, Vchannel: v, NodeId: node, PchannelTerm: term})
	ticks := func(tick uint64) []flush.TimeTick {
		return []flush.TimeTick{{VChannel: v, PChannelTerm: term, Tick: tick}}
	}
	if got := ticksWanted(l.State(), ticks(10)); got != nil {
		t.Fatalf("a growing segment wants a tick: %v", got)
	}
	// With no sealed segment anywhere the report is not walked.
	st, report := l.State(), ticks(10)
	if n := testing.AllocsPerRun(100, func() { ticksWanted(st, report) }); n != 0 {
		t.Fatalf("%.1f allocations for a report without a sealed segment, want 0", n)
	}
	l.MustPropose(t, &logpb.SealSegments{SegmentIds: seg.GetSegments().GetIds(), SealTs: 100, Reason: logpb.SealReason_SEAL_FLUSH, DecisionTerm: 3})
	if got := ticksWanted(l.State(), ticks(10)); !slices.Equal(got, []string{v}) {
		t.Fatalf("sealed at 100, tick 10: wanted %v, want [%s]", got, v)
	}
	if got := ticksWanted(l.State(), ticks(100)); got != nil {
		t.Fatalf("tick at the seal time still wants one: %v", got)
	}
}
