package fsm

import (
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

func withCaller(node uint64) cmdOpt { return func(c *commands.Command) { c.CallerNode = node } }

// TestApplyChecksTheCallersNode: inside Apply, a command that speaks for a
// session registered by a node credential must carry that credential's
// stamp (CallerNode); a stamped command may name only sessions of its own
// identity; unbound sessions (authentication off) and the leader's own
// unstamped drain and down commands pass as before.
func TestApplyChecksTheCallersNode(t *testing.T) {
	vc := vocab.VChannelName("dml_0", 100, 0)
	vc1 := vocab.VChannelName("dml_1", 100, 1)
	setup := []commands.Command{
		leaderEstablished(2, "c1"),
		cmd(&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0", "dml_1"}}),
		cmd(&logpb.RegisterStreamingNode{Address: addr1, Incarnation: "a", BoundNode: 7}), // session 1, identity 7
		cmd(&logpb.RegisterStreamingNode{Address: addr2, Incarnation: "b"}),               // session 2, unbound
		cmd(&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "dml_0", NodeId: 1, ExpectedTerm: 1}, {Pchannel: "dml_1", NodeId: 2, ExpectedTerm: 1}}}),
		cmd(&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}, {Pchannel: "dml_1", Term: 2}}}),
		cmd(&logpb.AllocVirtualChannels{CollectionId: 100, Count: 2}),
	}
	checkpoint := func(node uint64, vchannel string, opts ...cmdOpt) commands.Command {
		return cmd(&logpb.UpdateChannelCheckpoints{NodeId: node, Checkpoints: []*logpb.ChannelCheckpointUpdate{
			{Vchannel: vchannel, PchannelTerm: 2, Position: &logpb.WALPosition{Term: 2, Offset: 1, Timestamp: 100}}}}, opts...)
	}
	accepted1 := &logpb.Result{Value: &logpb.Result_Checkpoints{Checkpoints: &logpb.CheckpointsResult{Accepted: 1}}}
	permission := rejected(logpb.RejectCode_REJECT_PERMISSION)
	runApplyCases(t, []applyCase{
		{name: "the owner's identity", setup: setup, cmd: checkpoint(1, vc, withCaller(7)), want: accepted1},
		{name: "another identity", setup: setup, cmd: checkpoint(1, vc, withCaller(8)), want: permission, wantMsg: "proposed for node identity 8"},
		{name: "no stamp for a bound session", setup: setup, cmd: checkpoint(1, vc), want: permission, wantMsg: "needs the credential of node identity 7"},
		{name: "an unbound session, unstamped", setup: setup, cmd: checkpoint(2, vc1), want: accepted1},
		{name: "an unbound session, stamped", setup: setup, cmd: checkpoint(2, vc1, withCaller(7)), want: permission},
		{name: "an unknown session, stamped", setup: setup, cmd: checkpoint(9, vc, withCaller(7)), want: permission},
		{name: "a save for another identity's session", setup: setup,
			cmd: cmd(&logpb.SaveBinlogPaths{NodeId: 1, Vchannel: vc, PchannelTerm: 2, SegmentId: 1, CollectionId: 100, PartitionId: 1,
				Level: logpb.SegmentLevel_LEVEL_L1}, withCaller(8)),
			want: permission},
		{name: "the leader's own down mark", setup: setup, cmd: markDown(1, 3, "ttl"), want: okResult(), check: wantNode(1, addr1, "a", 3, nodeDown)},
		{name: "a deregistration by another identity", setup: setup, cmd: cmd(&logpb.MarkStreamingNodeDown{NodeId: 1, Epoch: 3, Reason: "x"}, withCaller(8)), want: permission},
		{name: "a deregistration by the owner", setup: setup, cmd: cmd(&logpb.MarkStreamingNodeDown{NodeId: 1, Epoch: 3, Reason: "x"}, withCaller(7)), want: okResult()},
		{name: "an operator's drain", setup: setup, cmd: drain(1, true, "op"), want: okResult()},
		{name: "a drain by another identity", setup: setup, cmd: cmd(&logpb.SetStreamingNodeDrain{NodeId: 1, Draining: true}, withCaller(8)), want: permission},
	})
}
