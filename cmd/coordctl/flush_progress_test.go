package main

import (
	"testing"

	"github.com/coordd/coordd/api/coordpb"
)

// flush --wait names what it waits on: the VChannel without a checkpoint
// first, else the one furthest behind, else a pending segment's VChannel.
func TestSlowestVChannel(t *testing.T) {
	tests := []struct {
		name   string
		behind []*coordpb.FlushLag
		want   string
	}{
		{"nothing", nil, ""},
		{"lag", []*coordpb.FlushLag{{Kind: "vchannel", Vchannel: "a", State: "behind", LagMs: 5}, {Kind: "vchannel", Vchannel: "b", State: "behind", LagMs: 50}}, "b"},
		{"no checkpoint wins", []*coordpb.FlushLag{{Kind: "vchannel", Vchannel: "a", State: "behind", LagMs: 500}, {Kind: "vchannel", Vchannel: "b", State: "none"}}, "b"},
		{"segment only", []*coordpb.FlushLag{{Kind: "segment", SegmentId: 7, Vchannel: "c", State: "Sealed"}}, "c"},
	}
	for _, tt := range tests {
		if got := slowestVChannel(&coordpb.GetFlushStateResponse{Behind: tt.behind}); got != tt.want {
			t.Errorf("%s: slowestVChannel = %q, want %q", tt.name, got, tt.want)
		}
	}
}
