package fsm

import (
	"errors"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

func vchResult(names ...string) *logpb.Result {
	if names == nil {
		names = []string{}
	}
	return &logpb.Result{Value: &logpb.Result_Vchannels{Vchannels: &logpb.VChannelList{Vchannels: names}}}
}

// A dropped VChannel's sentinel is forgotten only after the retention,
// once no segment of it is left, oldest drop first; then the VChannel is
// unknown, and a late report about it is still refused.
func TestApplyPruneDroppedVChannels(t *testing.T) {
	prune := func(term uint64, retention int64, max uint32, at int64) commands.Command {
		return cmd(&logpb.PruneDroppedVChannels{RetentionMs: retention, MaxCount: max, DecisionTerm: term}, withProposedAt(at))
	}
	// Collection 100 (v0, v1) with a segment on v0, dropped at 4000.
	dropped := segBase(createSeg(v0, 1, 2), cmd(&logpb.DropVirtualChannels{CollectionId: coll}, withProposedAt(4000)))
	// ... and its dropped segment pruned (the sentinel makes it prunable).
	emptied := concat(dropped, []commands.Command{
		cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 10, DecisionTerm: 2}, withProposedAt(5000))})
	runApplyCases(t, []applyCase{
		{name: "a segment is left on v0: only v1", setup: dropped, cmd: prune(2, 1000, 10, 5000), want: vchResult(v1)},
		{name: "too young: nothing", setup: emptied, cmd: prune(2, 5000, 10, 8999), want: vchResult(), unchanged: true},
		{name: "old enough: both, then unknown", setup: emptied, cmd: prune(2, 5000, 10, 9000), want: vchResult(v0, v1),
			check: func(t *testing.T, before, after *State) {
				for _, v := range []string{v0, v1} {
					if _, ok := after.ChannelCheckpoint(v); ok {
						t.Fatalf("checkpoint of %s is still there", v)
					}
					if _, err := after.RecoveryInfo(v); !errors.Is(err, ErrUnknownVChannel) {
						t.Fatalf("recovery info of forgotten %s: %v", v, err)
					}
				}
				if got, want := after.RecordCount(), before.RecordCount()-2; got != want {
					t.Fatalf("records %d, want %d", got, want)
				}
				late := cmd(&logpb.UpdateChannelCheckpoints{NodeId: 1, Checkpoints: []*logpb.ChannelCheckpointUpdate{
					{Vchannel: v0, PchannelTerm: 2, Position: &logpb.WALPosition{Term: 2, Offset: 9, Timestamp: 200}}}})
				_, res := mustApply(t, after, late)
				if res[0].GetCheckpoints().GetAccepted() != 0 {
					t.Fatalf("a late checkpoint of forgotten %s was accepted: %v", v0, res[0])
				}
			}},
		{name: "at most max, by name within one drop", setup: emptied, cmd: prune(2, 5000, 1, 9000), want: vchResult(v0)},
		{name: "decision from another term", setup: emptied, cmd: prune(1, 5000, 10, 9000), want: rejected(logpb.RejectCode_REJECT_STALE)},
		{name: "retention below a second", setup: emptied, cmd: prune(2, 10, 10, 9000), want: rejected(logpb.RejectCode_REJECT_INVALID)},
		{name: "a live vchannel is never pruned", setup: segBase(), cmd: prune(2, 1000, 10, 1<<40), want: vchResult(), unchanged: true},
	})
}

// The successor check lets a checkpoint disappear only when its VChannel
// was dropped, is not live and holds no segment.
func TestSuccessorRefusesALiveCheckpointDisappearing(t *testing.T) {
	s := build(t, segBase(createSeg(v0, 1, 2), cpUpdate(1, v0, 2, 101))...)
	next := *s
	next.seg.cps = next.seg.cps.Delete(v0)
	if err := segmentSuccessor(s, &next); err == nil {
		t.Fatal("a live checkpoint disappeared unnoticed")
	}
}
