package fsm

import (
	"fmt"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Four pchannels whose name order differs from their index order:
// dml_0 < dml_1 < dml_10 < dml_2.
var p10 = vocab.PChannelName("dml", 10)

func vbase(more ...commands.Command) []commands.Command {
	return append([]commands.Command{
		leaderEstablished(2, "c1"),
		initStreaming(clusterID, p2, p10, p1, p0),
	}, more...)
}

func vnames(coll int64, pchannels ...string) []string {
	out := make([]string, len(pchannels))
	for i, p := range pchannels {
		out[i] = vocab.VChannelName(p, coll, i)
	}
	return out
}

// wantCounts checks VChannelCount for every pchannel, in p0, p1, p10, p2 order.
func wantCounts(c0, c1, c10, c2 int) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		got := []int{after.VChannelCount(p0), after.VChannelCount(p1), after.VChannelCount(p10), after.VChannelCount(p2)}
		if fmt.Sprint(got) != fmt.Sprint([]int{c0, c1, c10, c2}) {
			t.Fatalf("vchannel counts (dml_0, dml_1, dml_10, dml_2) = %v, want %v", got, []int{c0, c1, c10, c2})
		}
	}
}

func wantCollection(coll int64, names ...string) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		c, ok := after.Collection(coll)
		if len(names) == 0 {
			if ok {
				t.Fatalf("collection %d still has vchannels %v", coll, c.Vchannels)
			}
			return
		}
		if !ok || fmt.Sprint(c.Vchannels) != fmt.Sprint(names) || c.CollectionId != coll {
			t.Fatalf("collection %d: %v, want %v", coll, c, names)
		}
	}
}

func TestApplyAllocVirtualChannels(t *testing.T) {
	// The config for "only dml_0 and dml_1 available", with a peer.
	subset := replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p1), rcluster("dr", "dr_0", "dr_1")}, edge(clusterID, "dr"))
	runApplyCases(t, []applyCase{
		{
			name:  "all empty: name order, shard = position",
			setup: vbase(),
			cmd:   allocV(100, 3),
			want:  vchannelsResult(vnames(100, p0, p1, p10)...),
			check: all(wantCounts(1, 1, 1, 0), wantCollection(100, vnames(100, p0, p1, p10)...), bumped(1)),
		},
		{
			name:  "least loaded first, ties by name",
			setup: vbase(allocV(1, 2)), // dml_0, dml_1
			cmd:   allocV(100, 3),
			want:  vchannelsResult(vnames(100, p10, p2, p0)...),
			check: wantCounts(2, 1, 1, 1),
		},
		{
			name:  "counts follow drops",
			setup: vbase(allocV(1, 4), allocV(2, 2), dropV(1)), // counts 1, 1, 0, 0
			cmd:   allocV(100, 4),
			want:  vchannelsResult(vnames(100, p10, p2, p0, p1)...),
			check: wantCounts(2, 2, 1, 1),
		},
		{
			name:  "heavier load sorts later; ties by name, not index",
			setup: vbase(allocV(1, 4), allocV(2, 2), allocV(3, 2), dropV(2)), // counts 1, 1, 2, 2
			cmd:   allocV(100, 3),
			want:  vchannelsResult(vnames(100, p0, p1, p10)...),
			check: wantCounts(2, 2, 3, 2),
		},
		{
			name:  "one shard per pchannel: count equal to the pchannels",
			setup: vbase(),
			cmd:   allocV(100, 4),
			want:  vchannelsResult(vnames(100, p0, p1, p10, p2)...),
			check: wantCounts(1, 1, 1, 1),
		},
		{
			name:    "more shards than pchannels is exhausted",
			setup:   vbase(),
			cmd:     allocV(100, 5),
			want:    rejected(logpb.RejectCode_REJECT_EXHAUSTED),
			wantMsg: "collection 100 needs 5 distinct pchannels, only 4 are available",
		},
		{
			name:    "before InitStreaming there is nothing to allocate on",
			setup:   []commands.Command{leaderEstablished(2, "c1")},
			cmd:     allocV(100, 1),
			want:    rejected(logpb.RejectCode_REJECT_EXHAUSTED),
			wantMsg: "only 0 are available",
		},
		{
			name:      "repeat with the same count returns the first placement",
			setup:     vbase(allocV(100, 2), allocV(1, 2)),
			cmd:       allocV(100, 2),
			want:      vchannelsResult(vnames(100, p0, p1)...),
			unchanged: true,
		},
		{
			name:    "repeat with another count conflicts",
			setup:   vbase(allocV(100, 2)),
			cmd:     allocV(100, 3),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "collection 100 already has 2 vchannels, not 3",
		},
		{
			name:  "only pchannels available in replication are candidates",
			setup: vbase(allocV(1, 2), subset), // dml_0, dml_1 loaded, yet the only ones available
			cmd:   allocV(100, 2),
			want:  vchannelsResult(vnames(100, p0, p1)...),
			check: wantCounts(2, 2, 0, 0),
		},
		{
			name:    "not enough available in replication is exhausted",
			setup:   vbase(subset),
			cmd:     allocV(100, 3),
			want:    rejected(logpb.RejectCode_REJECT_EXHAUSTED),
			wantMsg: "only 2 are available",
		},
		{
			name:    "a secondary does not allocate",
			setup:   vbase(replicate([]*logpb.ReplicateCluster{rcluster("dr", "dr_0"), rcluster(clusterID, p0)}, edge("dr", clusterID))),
			cmd:     allocV(100, 1),
			want:    rejected(logpb.RejectCode_REJECT_NOT_PRIMARY),
			wantMsg: "secondary",
		},
		{
			name:  "collection id 0 is invalid",
			setup: vbase(),
			cmd:   allocV(0, 1),
			want:  rejected(logpb.RejectCode_REJECT_INVALID),
		},
		{
			name:  "count 0 is invalid",
			setup: vbase(),
			cmd:   allocV(1, 0),
			want:  rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

func TestApplyDropVirtualChannels(t *testing.T) {
	runApplyCases(t, []applyCase{
		{
			name:  "drop forgets the collection and its counts",
			setup: vbase(allocV(1, 2), allocV(2, 3)), // counts 2, 1, 1, 1
			cmd:   dropV(2),
			want:  okResult(),
			check: all(wantCounts(1, 1, 0, 0), wantCollection(2), wantCollection(1, vnames(1, p0, p1)...), bumped(1),
				func(t *testing.T, _, after *State) {
					if after.vcountLen() != 2 {
						t.Fatalf("%d pchannels have a count entry, want 2 (zero counts are dropped)", after.vcountLen())
					}
				}),
		},
		{
			name:  "drop the last collection",
			setup: vbase(allocV(1, 4)),
			cmd:   dropV(1),
			want:  okResult(),
			check: all(wantCounts(0, 0, 0, 0), wantCollection(1)),
		},
		{
			name:    "unknown collection",
			setup:   vbase(allocV(1, 2)),
			cmd:     dropV(2),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "collection 2 has no vchannels",
		},
		{
			name:    "drop twice",
			setup:   vbase(allocV(1, 2), dropV(1)),
			cmd:     dropV(1),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "collection 1 has no vchannels",
		},
		{
			name:  "a dropped collection can be allocated again with another count",
			setup: vbase(allocV(1, 2), dropV(1), allocV(2, 1)),
			cmd:   allocV(1, 3),
			want:  vchannelsResult(vnames(1, p1, p10, p2)...),
			check: wantCounts(1, 1, 1, 1),
		},
		{
			name: "collection id 0 is invalid",
			cmd:  dropV(0),
			want: rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

// vcountLen is the number of pchannels with a recorded vchannel count.
func (s *State) vcountLen() int { return s.ch.vcount.Len() }

// TestVChannelsSurviveSnapshot: the placement and the derived counts are
// the same after a restore, so the next allocation agrees.
func TestVChannelsSurviveSnapshot(t *testing.T) {
	s := build(t, vbase(allocV(1, 2), allocV(2, 3), allocV(3, 1), dropV(1))...)
	r := restore(t, s)
	for _, p := range []string{p0, p1, p10, p2} {
		if r.VChannelCount(p) != s.VChannelCount(p) {
			t.Fatalf("%s: restored count %d, want %d", p, r.VChannelCount(p), s.VChannelCount(p))
		}
	}
	if r.vcountLen() != s.vcountLen() {
		t.Fatalf("restored %d count entries, want %d", r.vcountLen(), s.vcountLen())
	}
	a, ra := mustApply(t, s, allocV(9, 3))
	b, rb := mustApply(t, r, allocV(9, 3))
	checkResult(t, rb[0], ra[0], "")
	if !sameChannelView(a, b) {
		t.Fatal("original and restored states allocate differently")
	}
}
