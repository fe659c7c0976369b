package grpcserver

import (
	"encoding/base64"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/milvuspb"
)

// The Milvus services' rows of the role matrix (TestRoleMatrix): the same
// patterns as the coordd calls they become.
func init() {
	expect("UDPPPP",
		"/milvus.proto.streaming.StreamingCoordBroadcastService/Broadcast",
		"/milvus.proto.streaming.StreamingCoordAssignmentService/AssignmentDiscover")
	expect("UDDPDD", "/milvus.proto.streaming.StreamingCoordBroadcastService/Ack")
	expect("UDDDDP",
		"/milvus.proto.streaming.StreamingCoordAssignmentService/UpdateReplicateConfiguration",
		"/milvus.proto.streaming.StreamingCoordAssignmentService/UpdateWALBalancePolicy")
}

// milvusNodeRequests: a Milvus ack of broadcast 1 on session 1's VChannel
// dv0, well formed, so that only the caller's identity decides.
func milvusNodeRequests() map[string]proto.Message {
	return map[string]proto.Message{
		"/milvus.proto.streaming.StreamingCoordBroadcastService/Ack": milvusAckOf(1, dv0, 1, 100),
	}
}

// milvusAckOf is the ack request a Milvus consumer sends for VChannel
// vch's copy of broadcast id, stored at offset with time tick tt, with
// Milvus's property encodings.
func milvusAckOf(id uint64, vch string, offset, tt uint64) *milvuspb.BroadcastAckRequest {
	return &milvuspb.BroadcastAckRequest{Message: &milvuspb.ImmutableMessage{
		Id: milvusMessageID(offset),
		Properties: map[string]string{
			propType:      strconv.Itoa(int(milvuspb.MessageType_CreateCollection)),
			propBroadcast: encodeProp(&milvuspb.BroadcastHeader{BroadcastId: id, Vchannels: []string{vch}}),
			propVChannel:  vch,
			propTimeTick:  strconv.FormatUint(tt, 36),
		},
	}}
}

func encodeProp(m proto.Message) string {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}
