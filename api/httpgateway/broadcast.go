package httpgateway

import (
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
)

// broadcastRoutes are the broadcaster's endpoints.
func broadcastRoutes(s *grpcserver.Server) []route {
	var rs []route
	add := func(method, path string, newReq func() proto.Message, call rpcCall) {
		rs = append(rs, route{method: method, path: path, newReq: newReq, call: call})
	}
	nr, c := rpc(func() *coordpb.BroadcastRequest { return &coordpb.BroadcastRequest{} }, s.Broadcast)
	add(http.MethodPost, "/v1/broadcasts", nr, c)
	nr, c = rpc(func() *coordpb.ListBroadcastsRequest { return &coordpb.ListBroadcastsRequest{} }, s.ListBroadcasts)
	add(http.MethodGet, "/v1/broadcasts", nr, c)
	nr, c = rpc(func() *coordpb.GetBroadcastRequest { return &coordpb.GetBroadcastRequest{} }, s.GetBroadcast)
	add(http.MethodGet, "/v1/broadcasts/get", nr, c)
	nr, c = rpc(func() *coordpb.AckRequest { return &coordpb.AckRequest{} }, s.Ack)
	add(http.MethodPost, "/v1/broadcasts/ack", nr, c)
	nr, c = rpc(func() *coordpb.RetryBroadcastRequest { return &coordpb.RetryBroadcastRequest{} }, s.RetryBroadcast)
	add(http.MethodPost, "/v1/broadcasts/retry", nr, c)
	nr, c = rpc(func() *coordpb.AbandonBroadcastRequest { return &coordpb.AbandonBroadcastRequest{} }, s.AbandonBroadcast)
	add(http.MethodPost, "/v1/broadcasts/abandon", nr, c)
	return rs
}
