package grpcserver

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/vocab"
)

// TestFlushAll: FlushAll is an exclusive-Cluster broadcast of MsgFlushAll;
// the answer carries the per-PChannel time ticks its callback recorded,
// and GetFlushAllState compares the checkpoints with them.
func TestFlushAll(t *testing.T) {
	fb := &fakeBroadcasts{}
	tn := startTestNodeCfg(t, routines.Config{Doubles: routines.Doubles{Broadcasts: fb}})
	propose := func(body proto.Message) *logpb.Result {
		c, err := commands.New(body, "")
		if err != nil {
			t.Fatal(err)
		}
		res, err := tn.node.Propose(callCtx(t), c)
		if err != nil || res.Rejection != nil {
			t.Fatalf("%s: %v %v", c.Type, err, res.GetRejection())
		}
		return res
	}
	propose(&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0", "dml_1"}})
	propose(&logpb.RegisterStreamingNode{Address: "127.0.0.1:9001", Incarnation: "a"})
	propose(&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "dml_0", NodeId: 1, ExpectedTerm: 1}, {Pchannel: "dml_1", NodeId: 1, ExpectedTerm: 1}}})
	propose(&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}, {Pchannel: "dml_1", Term: 2}}})
	propose(&logpb.AllocVirtualChannels{CollectionId: dataColl, Count: 2})
	// The fake broadcaster runs the task through the real FSM: create, ack
	// both PChannels (dml_0 through its CChannel) at time ticks 500 and 700,
	// complete (the callback).
	fb.setAnswer(func(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error) {
		res := propose(&logpb.CreateBroadcast{MessageType: req.MessageType, ResourceKeys: req.ResourceKeys, Vchannels: []string{"dml_0_vcchan", "dml_1"}})
		id := res.GetBroadcast().BroadcastId
		propose(&logpb.AckBroadcast{BroadcastId: id, Checkpoints: []*logpb.VChannelCheckpoint{
			{Vchannel: "dml_0_vcchan", Term: 2, Offset: 1, TimeTick: 500}, {Vchannel: "dml_1", Term: 2, Offset: 1, TimeTick: 700}}})
		propose(&logpb.CompleteBroadcast{BroadcastId: id})
		return broadcaster.Result{BroadcastID: id}, nil
	})
	dc := coordpb.NewDataCoordClient(tn.conn)
	ctx := callCtx(t)
	fa, err := dc.FlushAll(ctx, &coordpb.FlushAllRequest{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := fb.requests()
	if len(reqs) != 1 || reqs[0].MessageType != vocab.MsgFlushAll || len(reqs[0].ResourceKeys) != 1 ||
		reqs[0].ResourceKeys[0].Domain != logpb.ResourceDomain_RK_CLUSTER || reqs[0].ResourceKeys[0].Shared {
		t.Fatalf("broadcast request %+v", reqs)
	}
	if len(fa.FlushAllTs) != 2 || fa.FlushAllTs[0].TimeTick != 500 || fa.FlushAllTs[1].TimeTick != 700 || fa.FlushAllTsLegacy != 700 || fa.ClusterId != "c" {
		t.Fatalf("flush-all response %v", fa)
	}
	st, err := dc.GetFlushAllState(ctx, &coordpb.GetFlushAllStateRequest{FlushAllTs: fa.FlushAllTs})
	if err != nil || st.Flushed || st.VchannelsTotal != 2 || len(st.Behind) != 2 {
		t.Fatalf("flush-all state before any checkpoint: %v %v", st, err)
	}
	for i, v := range []string{dv0, vocab.VChannelName("dml_1", dataColl, 1)} {
		if _, err := dc.UpdateChannelCheckpoints(ctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: 1, Checkpoints: []*coordpb.ChannelCheckpoint{
			{Vchannel: v, PchannelTerm: 2, Position: &coordpb.Position{Term: 2, Offset: 2, Timestamp: uint64(600 + 100*i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err = dc.GetFlushAllState(ctx, &coordpb.GetFlushAllStateRequest{FlushAllTs: fa.FlushAllTs}); err != nil || !st.Flushed {
		t.Fatalf("flush-all state with every checkpoint at its pchannel's tick: %v %v", st, err)
	}
	if st, err = dc.GetFlushAllState(ctx, &coordpb.GetFlushAllStateRequest{FlushAllTsLegacy: 700}); err != nil || st.Flushed || st.Behind[0].Vchannel != dv0 {
		t.Fatalf("legacy single timestamp: %v %v", st, err)
	}
	// A broadcast whose callback did not record it is reported, not hidden.
	fb.setAnswer(func(context.Context, broadcaster.Request) (broadcaster.Result, error) {
		return broadcaster.Result{BroadcastID: 999}, nil
	})
	_, err = dc.FlushAll(ctx, &coordpb.FlushAllRequest{})
	wantCode(t, "FlushAll whose callback did not run", err, codes.FailedPrecondition)
}
