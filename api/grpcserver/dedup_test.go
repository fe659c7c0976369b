package grpcserver

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/coordd/coordd/api/coordpb"
)

// TestReusedRequestIDForAnotherRequest: a request ID reused for a different
// request is InvalidArgument and changes nothing; the same request again
// gets its first answer.
func TestReusedRequestIDForAnotherRequest(t *testing.T) {
	tn, _, _ := startBroadcastNode(t)
	ch := coordpb.NewChannelsClient(tn.conn)
	ctx := callCtx(t)
	first, err := ch.AllocVirtualChannels(ctx, &coordpb.AllocVirtualChannelsRequest{CollectionId: 300, Count: 2, RequestId: "R1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ch.AllocVirtualChannels(ctx, &coordpb.AllocVirtualChannelsRequest{CollectionId: 301, Count: 3, RequestId: "R1"})
	checkStatus(t, "AllocVirtualChannels(301, R1)", err, codes.InvalidArgument, `request_id "R1" was already used for a different request`)
	_, err = ch.DropVirtualChannels(ctx, &coordpb.DropVirtualChannelsRequest{CollectionId: 300, RequestId: "R1"})
	checkStatus(t, "DropVirtualChannels(300, R1)", err, codes.InvalidArgument, "different request")
	st := tn.node.State()
	if _, ok := st.Collection(301); ok {
		t.Error("collection 301 was allocated under a reused request ID")
	}
	if c, ok := st.Collection(300); !ok || len(c.Vchannels) != 2 {
		t.Errorf("collection 300 = %v (found %v) after a refused drop; want its two vchannels", c, ok)
	}
	again, err := ch.AllocVirtualChannels(ctx, &coordpb.AllocVirtualChannelsRequest{CollectionId: 300, Count: 2, RequestId: "R1"})
	if err != nil || len(again.Vchannels) != 2 || again.Vchannels[0] != first.Vchannels[0] || again.Vchannels[1] != first.Vchannels[1] {
		t.Fatalf("retry of R1 = %v, %v; want the first answer %v", again, err, first.Vchannels)
	}
}
