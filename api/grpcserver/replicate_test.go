package grpcserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/fsm"
)

// secondaryConfig makes the broadcast fixture's cluster a secondary of "dr".
func secondaryConfig() *logpb.ReplicateConfiguration {
	return &logpb.ReplicateConfiguration{
		Clusters: []*logpb.ReplicateCluster{{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1}},
			{ClusterId: "dr", Pchannels: []string{"dr_0", "dr_1"}}},
		Topology: []*logpb.ReplicateTopology{{SourceClusterId: "dr", TargetClusterId: bcCluster}},
	}
}

// TestReplicateOnSecondaryRefusedAtOnce: a secondary answers an update
// with FailedPrecondition at once (it used to wait, without a server-side
// bound, for a configuration nothing delivers), naming the way out.
func TestReplicateOnSecondaryRefusedAtOnce(t *testing.T) {
	tn, fb, _ := startBroadcastNode(t)
	mustCommit(t, tn, &logpb.UpdateReplicateConfiguration{Config: secondaryConfig()})
	ch := coordpb.NewChannelsClient(tn.conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err := ch.UpdateReplicateConfiguration(ctx, &coordpb.UpdateReplicateConfigurationRequest{Config: &coordpb.ReplicateConfiguration{
		Clusters: []*coordpb.ReplicateCluster{{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1}}}}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "ResetReplicateRole") {
		t.Fatalf("update on a secondary: %v, want FailedPrecondition naming ResetReplicateRole", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refusal took %v", d)
	}
	if n := len(fb.requests()); n != 0 {
		t.Fatalf("%d broadcasts from a secondary", n)
	}
}

// TestResetReplicateRole: the operator's reset makes a secondary a primary
// (only this cluster is left, with its pchannels); a reason is required; a
// primary is refused.
func TestResetReplicateRole(t *testing.T) {
	tn, _, _ := startBroadcastNode(t)
	ch := coordpb.NewChannelsClient(tn.conn)
	if _, err := ch.ResetReplicateRole(callCtx(t), &coordpb.ResetReplicateRoleRequest{Reason: "x"}); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "already a primary") {
		t.Fatalf("reset of a primary: %v", err)
	}
	mustCommit(t, tn, &logpb.UpdateReplicateConfiguration{Config: secondaryConfig()})
	if _, err := ch.ResetReplicateRole(callCtx(t), &coordpb.ResetReplicateRoleRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("reset without a reason: %v", err)
	}
	if tn.node.State().IsPrimary() {
		t.Fatal("a refused reset changed the role")
	}
	resp, err := ch.ResetReplicateRole(callCtx(t), &coordpb.ResetReplicateRoleRequest{Reason: "primary site lost"})
	if err != nil {
		t.Fatal(err)
	}
	want := &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1}}}}
	if resp.Role != "PRIMARY" || resp.ClusterId != bcCluster || !proto.Equal(logReplicateConfig(t, resp.Config), want) {
		t.Fatalf("reset answered %v", resp)
	}
	if st := tn.node.State(); !st.IsPrimary() || !proto.Equal(st.ReplicateConfiguration(), want) {
		t.Fatalf("after the reset: primary %v, config %v", st.IsPrimary(), st.ReplicateConfiguration())
	}
}

// TestResetReplicateRoleBadInputChangesNothing: a missing, blank or
// oversized reason is InvalidArgument before anything is proposed (the
// log does not grow), and a reset of a primary is refused by Apply with
// FailedPrecondition: in each case the configuration, the role and the
// assignment version stay as they were.
func TestResetReplicateRoleBadInputChangesNothing(t *testing.T) {
	tn, _, _ := startBroadcastNode(t)
	ch := coordpb.NewChannelsClient(tn.conn)
	primaryCfg := &logpb.ReplicateConfiguration{
		Clusters: []*logpb.ReplicateCluster{{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1}},
			{ClusterId: "dr", Pchannels: []string{"dr_0", "dr_1"}}},
		Topology: []*logpb.ReplicateTopology{{SourceClusterId: bcCluster, TargetClusterId: "dr"}},
	}
	type view struct {
		cfg     *logpb.ReplicateConfiguration
		primary bool
		version fsm.AssignmentVersion
		last    uint64
	}
	look := func() view {
		st := tn.node.State()
		return view{st.ReplicateConfiguration(), st.IsPrimary(), st.AssignmentVersion(), tn.node.Raft().LastIndex()}
	}
	same := func(a, b view, sameLog bool) bool {
		return proto.Equal(a.cfg, b.cfg) && a.primary == b.primary && a.version == b.version && (!sameLog || a.last == b.last)
	}
	for _, setup := range []struct {
		name string
		cfg  *logpb.ReplicateConfiguration
	}{{"secondary", secondaryConfig()}, {"primary", primaryCfg}} {
		mustCommit(t, tn, &logpb.UpdateReplicateConfiguration{Config: setup.cfg})
		for _, tc := range []struct {
			reason, message string
		}{
			{"", "needs a reason"},
			{" \t ", "needs a reason"},
			{strings.Repeat("r", 1025), "reason is 1025 bytes (max 1024)"},
		} {
			before := look()
			_, err := ch.ResetReplicateRole(callCtx(t), &coordpb.ResetReplicateRoleRequest{Reason: tc.reason})
			checkStatus(t, setup.name+": ResetReplicateRole", err, codes.InvalidArgument, tc.message)
			if after := look(); !same(before, after, true) {
				t.Fatalf("%s: a reset with reason %q changed %+v to %+v", setup.name, tc.reason, before, after)
			}
		}
	}
	// The cluster is a primary now: a well-formed reset reaches Apply,
	// which refuses it.
	before := look()
	_, err := ch.ResetReplicateRole(callCtx(t), &coordpb.ResetReplicateRoleRequest{Reason: "promote"})
	checkStatus(t, "ResetReplicateRole on a primary", err, codes.FailedPrecondition, "already a primary")
	if after := look(); !same(before, after, false) || !proto.Equal(after.cfg, primaryCfg) {
		t.Fatalf("a refused reset changed %+v to %+v", before, after)
	}
}

// logReplicateConfig is an API configuration as the log records it.
func logReplicateConfig(t *testing.T, c *coordpb.ReplicateConfiguration) *logpb.ReplicateConfiguration {
	t.Helper()
	cfg, err := channels.NewReplicateConfig(c)
	if err != nil {
		t.Fatalf("configuration %v: %v", c, err)
	}
	return cfg.Config()
}
