package httpgateway

import (
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
)

// diagnosticsRoutes are the member's own log level and recent errors
// (never forwarded: each answer is about the member asked).
func diagnosticsRoutes(s *grpcserver.Server) []route {
	var rs []route
	add := func(method, path string, newReq func() proto.Message, call rpcCall) {
		rs = append(rs, route{method: method, path: path, newReq: newReq, call: call})
	}
	nr, c := rpc(func() *coordpb.GetLogLevelRequest { return &coordpb.GetLogLevelRequest{} }, s.GetLogLevel)
	add(http.MethodGet, "/v1/admin/log-level", nr, c)
	nr, c = rpc(func() *coordpb.SetLogLevelRequest { return &coordpb.SetLogLevelRequest{} }, s.SetLogLevel)
	add(http.MethodPost, "/v1/admin/log-level", nr, c)
	nr, c = rpc(func() *coordpb.RecentErrorsRequest { return &coordpb.RecentErrorsRequest{} }, s.RecentErrors)
	add(http.MethodGet, "/v1/admin/recent-errors", nr, c)
	return rs
}
