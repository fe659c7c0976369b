package metrics_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coordd/coordd/api/metrics"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

func TestDataCollector(t *testing.T) {
	st := fsm.New()
	cmds := []commands.Command{
		commands.MustNew(&logpb.LeaderEstablished{Term: 2, LeaderId: "c"}),
		commands.MustNew(&logpb.ExtendTSOWindow{LimitPhysicalMs: 20_000}), // the checkpoint's time tick is below it
		commands.MustNew(&logpb.RegisterStreamingNode{Address: "10.0.0.1:1", Incarnation: "a"}),
		commands.MustNew(&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0"}}),
		commands.MustNew(&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "dml_0", NodeId: 1, ExpectedTerm: 1}}}),
		commands.MustNew(&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}}}),
		commands.MustNew(&logpb.AllocVirtualChannels{CollectionId: 7, Count: 1}),
		commands.MustNew(&logpb.CreateSegment{CollectionId: 7, Vchannel: "dml_0_7v0", NodeId: 1, PchannelTerm: 2}),
		commands.MustNew(&logpb.CreateSegment{CollectionId: 7, Vchannel: "dml_0_7v0", NodeId: 1, PchannelTerm: 2}),
		commands.MustNew(&logpb.UpdateChannelCheckpoints{NodeId: 1, Checkpoints: []*logpb.ChannelCheckpointUpdate{
			{Vchannel: "dml_0_7v0", PchannelTerm: 2, Position: &logpb.WALPosition{Term: 2, Timestamp: fsm.ComposeTS(10_000)}}}}),
	}
	for _, c := range cmds {
		next, res, err := st.ApplyCommands(st.AppliedIndex()+1, c)
		if err != nil || res[0].Rejection != nil {
			t.Fatalf("%s: %v %v", c.Type, err, res[0].GetRejection())
		}
		st = next
	}
	c := metrics.NewDataCollector(func() *fsm.State { return st }, func() int { return 3 }, func() time.Time { return time.UnixMilli(25_000) })
	want := `
# HELP coordd_datacoord_channel_checkpoint_lag_seconds How far each VChannel's checkpoint is behind this node's clock (dropped VChannels are not listed).
# TYPE coordd_datacoord_channel_checkpoint_lag_seconds gauge
coordd_datacoord_channel_checkpoint_lag_seconds{channel_name="dml_0_7v0"} 15
# HELP coordd_datacoord_segment_allocations Segment allocations in the leader's memory that have not expired (0 on followers).
# TYPE coordd_datacoord_segment_allocations gauge
coordd_datacoord_segment_allocations 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "coordd_datacoord_channel_checkpoint_lag_seconds", "coordd_datacoord_segment_allocations"); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# HELP coordd_datacoord_segment_num Segments by state and level.\n# TYPE coordd_datacoord_segment_num gauge\n")
	for _, s := range []string{"Dropped", "Flushed", "Flushing", "Growing", "Importing", "Sealed"} {
		for _, l := range []string{"L0", "L1", "L2"} {
			n := 0
			if s == "Growing" && l == "L1" {
				n = 2
			}
			fmt.Fprintf(&b, "coordd_datacoord_segment_num{level=%q,state=%q} %d\n", l, s, n)
		}
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(b.String()), "coordd_datacoord_segment_num"); err != nil {
		t.Fatal(err)
	}
}
