package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// wantAvailable checks AvailableInReplication for p0..p3 and the role.
func wantAvailable(primary bool, available ...string) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		checkAvailable(t, after, primary, available...)
	}
}

func checkAvailable(t testing.TB, s *State, primary bool, available ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, p := range available {
		want[p] = true
	}
	for _, p := range pchannelNames(s) {
		if got := s.AvailableInReplication(p); got != want[p] {
			t.Fatalf("AvailableInReplication(%s) = %v, want %v", p, got, want[p])
		}
	}
	if s.IsPrimary() != primary {
		t.Fatalf("IsPrimary() = %v, want %v", s.IsPrimary(), primary)
	}
}

func wantConfig(clusters []*logpb.ReplicateCluster, topology ...*logpb.ReplicateTopology) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		want := &logpb.ReplicateConfiguration{Clusters: clusters, Topology: topology}
		if got := after.ReplicateConfiguration(); !proto.Equal(got, want) {
			t.Fatalf("replicate configuration %v, want %v", got, want)
		}
	}
}

func TestApplyUpdateReplicateConfiguration(t *testing.T) {
	clusters := func(own []string, peer ...string) []*logpb.ReplicateCluster {
		return []*logpb.ReplicateCluster{rcluster(clusterID, own...), rcluster("dr", peer...)}
	}
	first := replicate(clusters([]string{p1, p3}, "dr_0", "dr_1"), edge(clusterID, "dr"))
	allFour := []string{p0, p1, p2, p3}
	runApplyCases(t, []applyCase{
		{
			name:  "no configuration: everything available, primary",
			setup: base(),
			cmd:   addPCh(p0), // any no-op, to get a before/after pair
			want:  numberResult(0),
			check: all(wantAvailable(true, allFour...), func(t *testing.T, _, after *State) {
				if after.ReplicateConfiguration() != nil {
					t.Fatal("a configuration appeared from nowhere")
				}
			}),
			unchanged: true,
		},
		{
			name:  "a subset of this cluster's pchannels is available",
			setup: base(),
			cmd:   first,
			want:  okResult(),
			check: all(wantAvailable(true, p1, p3), bumped(1),
				wantConfig(clusters([]string{p1, p3}, "dr_0", "dr_1"), edge(clusterID, "dr"))),
		},
		{
			name:  "target of an edge is a secondary",
			setup: base(),
			cmd:   replicate(clusters(allFour, "dr_0", "dr_1", "dr_2", "dr_3"), edge("dr", clusterID)),
			want:  okResult(),
			check: wantAvailable(false, allFour...),
		},
		{
			name:  "a config without topology leaves this cluster primary",
			setup: base(),
			cmd:   replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p2)}),
			want:  okResult(),
			check: wantAvailable(true, p2),
		},
		{
			name:  "the role can change",
			setup: base(first),
			cmd:   replicate(clusters([]string{p1, p3}, "dr_0", "dr_1"), edge("dr", clusterID)),
			want:  okResult(),
			check: all(wantAvailable(false, p1, p3), bumped(1)),
		},
		{
			name:      "an equal configuration is a no-op",
			setup:     base(first),
			cmd:       replicate(clusters([]string{p1, p3}, "dr_0", "dr_1"), edge(clusterID, "dr")),
			want:      okResult(),
			unchanged: true,
		},
		{
			name:  "pchannel lists may grow by appending",
			setup: base(first),
			cmd:   replicate(clusters([]string{p1, p3, p0}, "dr_0", "dr_1", "dr_2"), edge(clusterID, "dr")),
			want:  okResult(),
			check: all(wantAvailable(true, p0, p1, p3), bumped(1)),
		},
		{
			name:  "a new cluster may join",
			setup: base(first),
			cmd: replicate(append(clusters([]string{p1, p3}, "dr_0", "dr_1"), rcluster("dr2", "x_0", "x_1")),
				edge(clusterID, "dr"), edge(clusterID, "dr2")),
			want:  okResult(),
			check: wantAvailable(true, p1, p3),
		},
		{
			name:    "reordering this cluster's pchannels is invalid",
			setup:   base(first),
			cmd:     replicate(clusters([]string{p3, p1}, "dr_0", "dr_1"), edge(clusterID, "dr")),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "may only be extended by appending",
		},
		{
			name:    "removing a pchannel is invalid",
			setup:   base(first),
			cmd:     replicate(clusters([]string{p1}, "dr_0"), edge(clusterID, "dr")),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "cluster " + clusterID + ": pchannels may only be extended by appending",
		},
		{
			name:    "inserting before the end is invalid",
			setup:   base(first),
			cmd:     replicate(clusters([]string{p0, p1, p3}, "dr_0", "dr_1", "dr_2"), edge(clusterID, "dr")),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "may only be extended by appending",
		},
		{
			name:    "reordering a peer's pchannels is invalid",
			setup:   base(first),
			cmd:     replicate(clusters([]string{p1, p3}, "dr_1", "dr_0"), edge(clusterID, "dr")),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "cluster dr: pchannels may only be extended by appending",
		},
		{
			name:    "a config not listing this cluster is invalid",
			setup:   base(),
			cmd:     replicate([]*logpb.ReplicateCluster{rcluster("dr", "dr_0")}),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: `does not list this cluster "by-dev"`,
		},
		{
			name:    "a pchannel this cluster lacks is invalid",
			setup:   base(),
			cmd:     replicate(clusters([]string{p0, "dml_9"}, "dr_0", "dr_1")),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "lists pchannel dml_9, which this cluster does not have",
		},
		{
			name:    "before InitStreaming there is no cluster to list",
			setup:   []commands.Command{leaderEstablished(2, "c1")},
			cmd:     replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0)}),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "does not list this cluster",
		},
		{
			name:  "a bad shape is invalid",
			setup: base(),
			cmd:   replicate(clusters([]string{p0}, "dr_0"), edge(clusterID, clusterID)),
			want:  rejected(logpb.RejectCode_REJECT_INVALID),
		},
	})
}

// TestReplicationNewPChannelUnavailable: a pchannel added after the
// configuration is not listed in it, so it is not available until the
// configuration appends it.
func TestReplicationNewPChannelUnavailable(t *testing.T) {
	s := build(t, base(replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p1, p2, p3)}), addPCh("dml_4"))...)
	checkAvailable(t, s, true, p0, p1, p2, p3)
	s, _ = mustApply(t, s, replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p1, p2, p3, "dml_4")}))
	checkAvailable(t, s, true, p0, p1, p2, p3, "dml_4")
}

// TestReplicationSurvivesSnapshot: availability and role are derived from
// the stored configuration, so a restored replica agrees.
func TestReplicationSurvivesSnapshot(t *testing.T) {
	tests := []struct {
		name      string
		cfg       commands.Command
		primary   bool
		available []string
	}{
		{"none", addPCh(p0), true, []string{p0, p1, p2, p3}},
		{"primary subset", replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p2, p0), rcluster("dr", "d_0", "d_1")}, edge(clusterID, "dr")), true, []string{p0, p2}},
		{"secondary", replicate([]*logpb.ReplicateCluster{rcluster("dr", "d_0"), rcluster(clusterID, p3)}, edge("dr", clusterID)), false, []string{p3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, base(tt.cfg)...)
			checkAvailable(t, s, tt.primary, tt.available...)
			r := restore(t, s)
			checkAvailable(t, r, tt.primary, tt.available...)
			if !proto.Equal(r.ReplicateConfiguration(), s.ReplicateConfiguration()) {
				t.Fatalf("restored configuration %v, want %v", r.ReplicateConfiguration(), s.ReplicateConfiguration())
			}
			// The restored replica answers the next command the same way.
			_, ra := mustApply(t, s, allocV(5, 1))
			_, rb := mustApply(t, r, allocV(5, 1))
			if !proto.Equal(ra[0], rb[0]) {
				t.Fatalf("alloc after restore: %v, original %v", rb[0], ra[0])
			}
			if tt.primary == (ra[0].GetRejection().GetCode() == logpb.RejectCode_REJECT_NOT_PRIMARY) {
				t.Fatalf("alloc on primary=%v: %v", tt.primary, ra[0])
			}
		})
	}
}
