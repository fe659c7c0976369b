package grpcserver

import (
	"slices"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/fsm"
)

// With no segments, no tick is wanted (an idle VChannel stays idle).
func TestTicksWantedEmptyState(t *testing.T) {
	got := ticksWanted(fsm.New(), []*coordpb.ChannelTimeTick{{Vchannel: "p_0_1v0", TimeTick: 5}})
	if !slices.Equal(got, nil) {
		t.Fatalf("ticksWanted = %v, want none", got)
	}
}
