package grpcserver

import (
	"context"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/milvuspb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/testutil"
	"github.com/coordd/coordd/vocab"
)

// TestMilvusAndCoorddSurfacesAgree: the same broadcast through coordd's
// own API and through Milvus's surface, on a member with the real
// broadcaster, has the same outcome — refused, with nothing created — and
// each surface answers in its own terms: coordd's gRPC code, and Milvus's
// StreamingCode under Milvus's gRPC code.
func TestMilvusAndCoorddSurfacesAgree(t *testing.T) {
	tn := startTestNodeCfg(t, routines.Config{Broadcaster: &broadcaster.Config{}})
	mustCommit(t, tn, &logpb.InitStreaming{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1, bcP2}})
	coordd := coordpb.NewBroadcasterClient(tn.conn)
	milvus := milvuspb.NewStreamingCoordBroadcastServiceClient(tn.conn)
	cch := []string{bcCChan}
	// A pending task holding default:c1 exclusively, made through the
	// broadcaster (which locks its keys): with no streaming node it stays
	// pending, and its call waits until the test ends.
	holdCtx, release := context.WithCancel(context.Background())
	t.Cleanup(release)
	go func() {
		_, _ = coordd.Broadcast(holdCtx, &coordpb.BroadcastRequest{MessageType: "AlterCollection", Vchannels: cch,
			ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: "default:c1"}}})
	}()
	testutil.EventuallyWithin(t, callTimeout, "the holder's task pending", func() bool { return len(tn.node.State().PendingBroadcasts()) == 1 })
	for _, c := range []struct {
		name       string
		own        *coordpb.BroadcastRequest
		mil        *milvuspb.BroadcastRequest
		ownCode    codes.Code
		milCode    milvuspb.StreamingCode
		milGRPC    codes.Code
		ownTimeout time.Duration
	}{
		{"unknown domain",
			&coordpb.BroadcastRequest{MessageType: "AlterCollection", Vchannels: cch, ResourceKeys: []*coordpb.ResourceKey{{Domain: "BOGUS", Key: "x"}}},
			milvusBroadcastOf(milvuspb.MessageType_AlterCollection, nil, cch, &milvuspb.ResourceKey{Domain: 55, Key: "x"}),
			codes.InvalidArgument, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, codes.InvalidArgument, 0},
		{"not a broadcast type",
			&coordpb.BroadcastRequest{MessageType: "Insert", Vchannels: cch},
			milvusBroadcastOf(milvuspb.MessageType_Insert, nil, cch),
			codes.InvalidArgument, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, codes.InvalidArgument, 0},
		{"no such pchannel",
			&coordpb.BroadcastRequest{MessageType: "AlterCollection", Vchannels: []string{"by-dev-rootcoord-dml_9"}},
			milvusBroadcastOf(milvuspb.MessageType_AlterCollection, nil, []string{"by-dev-rootcoord-dml_9"}),
			codes.NotFound, milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST, codes.FailedPrecondition, 0},
		{"held key",
			&coordpb.BroadcastRequest{MessageType: "AlterCollection", Vchannels: cch,
				ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: "default:c1"}}},
			milvusBroadcastOf(milvuspb.MessageType_AlterCollection, nil, cch, collKey("default", "c1", false)),
			codes.DeadlineExceeded, milvuspb.StreamingCode_STREAMING_CODE_RESOURCE_ACQUIRED, codes.FailedPrecondition, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			tasks := func() int { return len(tn.node.State().BroadcastTasks()) }
			before := tasks()
			ctx := callCtx(t)
			if c.ownTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.ownTimeout)
				defer cancel()
			}
			_, ownErr := coordd.Broadcast(ctx, c.own)
			_, milErr := milvus.Broadcast(callCtx(t), c.mil)
			if got := status.Code(ownErr); got != c.ownCode {
				t.Errorf("coordd's API: %v, want %v", ownErr, c.ownCode)
			}
			g, code := streamingCode(t, milErr)
			if g != c.milGRPC || code != c.milCode {
				t.Errorf("Milvus's surface: %v %v (%v), want %v %v", g, code, milErr, c.milGRPC, c.milCode)
			}
			if after := tasks(); after != before {
				t.Errorf("refusals created tasks: %d before, %d after", before, after)
			}
		})
	}
	// Both surfaces name the VChannel the same way: a held key on one is
	// held on the other.
	if !reflect.DeepEqual(milvusDomains[milvuspb.ResourceDomain_ResourceDomainCollectionName], vocab.DomainCollectionName) ||
		vocab.VChannelName(bcP0, 1, 0) != bcP0+"_1v0" {
		t.Fatal("domain or VChannel naming drifted")
	}
}
