package fsm

import (
	"strings"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

func resetRole(reason string, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.ResetReplicateRole{Reason: reason}, opts...)
}

func configResult(clusters ...*logpb.ReplicateCluster) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_ReplicateConfig{ReplicateConfig: &logpb.ReplicateConfiguration{Clusters: clusters}}}
}

// TestApplyResetReplicateRole: the guard of a role reset runs in Apply,
// against the state the reset applies to. A secondary becomes a primary
// listing only itself with the PChannels it had; anything that is a
// primary already (no configuration, no edge into this cluster, a reset
// applied just before), a blank or oversized reason and a deposed
// leader's reset are refused, and nothing changes.
func TestApplyResetReplicateRole(t *testing.T) {
	dr := rcluster("dr", "dr_0", "dr_1")
	secondary := replicate([]*logpb.ReplicateCluster{dr, rcluster(clusterID, p1, p3)}, edge("dr", clusterID))
	runApplyCases(t, []applyCase{
		{
			name:  "a secondary becomes a primary with its own pchannels",
			setup: base(secondary),
			cmd:   resetRole("primary site lost"),
			want:  configResult(rcluster(clusterID, p1, p3)),
			check: all(wantAvailable(true, p1, p3), bumped(1), wantConfig([]*logpb.ReplicateCluster{rcluster(clusterID, p1, p3)})),
		},
		{
			name: "a secondary among several keeps only itself",
			setup: base(replicate([]*logpb.ReplicateCluster{dr, rcluster(clusterID, p0, p2), rcluster("dr2", "x_0", "x_1")},
				edge("dr", clusterID), edge("dr", "dr2"))),
			cmd:   resetRole("promote"),
			want:  configResult(rcluster(clusterID, p0, p2)),
			check: all(wantAvailable(true, p0, p2), wantConfig([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p2)})),
		},
		{
			name:    "no configuration: already a primary",
			setup:   base(),
			cmd:     resetRole("promote"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "already a primary",
		},
		{
			name:    "a primary with a configuration is refused",
			setup:   base(replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p1, p3), dr}, edge(clusterID, "dr"))),
			cmd:     resetRole("promote"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "already a primary",
		},
		{
			name:    "a configuration without topology is a primary",
			setup:   base(replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p2)})),
			cmd:     resetRole("promote"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "already a primary",
		},
		{
			name:    "a second reset finds a primary",
			setup:   base(secondary, resetRole("first")),
			cmd:     resetRole("second"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "already a primary",
		},
		{
			name:    "before InitStreaming there is nothing to reset",
			setup:   []commands.Command{leaderEstablished(2, "c1")},
			cmd:     resetRole("promote"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "already a primary",
		},
		{
			name:    "a blank reason is invalid",
			setup:   base(secondary),
			cmd:     resetRole(" \t"),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "needs a reason",
		},
		{
			name:    "an oversized reason is invalid",
			setup:   base(secondary),
			cmd:     resetRole(strings.Repeat("r", vocab.MaxReasonBytes+1)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "reason is 1025 bytes",
		},
		{
			name:    "a deposed leader's reset is stale",
			setup:   base(secondary, leaderEstablished(3, "c2")),
			cmd:     resetRole("promote", withTerm(2)),
			want:    rejected(logpb.RejectCode_REJECT_STALE),
			wantMsg: "established itself in term 3",
		},
	})
}
