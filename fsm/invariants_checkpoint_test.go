package fsm

import (
	"strings"
	"testing"

	"github.com/coordd/coordd/commands"
)

// A checkpoint other than the dropped sentinel must name a live VChannel:
// the checkpoint apply skips the collection lookup for a VChannel that has
// one, so a state breaking this rule would accept checkpoints of a
// VChannel no collection has.
func TestInvariantCheckpointNamesALiveVChannel(t *testing.T) {
	s, err := Synthetic(SyntheticShape{Segments: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("synthetic state: %v", err)
	}
	const ghost = "by-dev-rootcoord-dml_0_987654321v0"
	if _, ok := s.knownVChannel(ghost); ok {
		t.Fatalf("%s is live in the synthetic state", ghost)
	}

	live := *s // the maps are persistent: a copy shares nothing it changes
	live.seg.cps = live.seg.cps.Set(ghost, &ChannelCheckpoint{VChannel: ghost, Position: Position{Term: 1, Offset: 1, Timestamp: 1}})
	if err := live.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "no live vchannel") {
		t.Fatalf("a live checkpoint of an unknown vchannel: CheckInvariants = %v", err)
	}

	dropped := *s
	dropped.seg.cps = dropped.seg.cps.Set(ghost, &ChannelCheckpoint{VChannel: ghost, Position: Position{Timestamp: commands.DroppedTimestamp}})
	if err := dropped.CheckInvariants(); err != nil {
		t.Fatalf("the dropped sentinel of a forgotten vchannel: %v", err)
	}
}
