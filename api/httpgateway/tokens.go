package httpgateway

import (
	"net/http"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
)

// tokenRoutes serves the Tokens service (admin only, docs/security.md).
func tokenRoutes(s *grpcserver.Server) []route {
	var rs []route
	nr, c := rpc(func() *coordpb.CreateTokenRequest { return &coordpb.CreateTokenRequest{} }, s.CreateToken)
	rs = append(rs, route{method: http.MethodPost, path: "/v1/tokens", newReq: nr, call: c})
	nr, c = rpc(func() *coordpb.ListTokensRequest { return &coordpb.ListTokensRequest{} }, s.ListTokens)
	rs = append(rs, route{method: http.MethodGet, path: "/v1/tokens", newReq: nr, call: c})
	nr, c = rpc(func() *coordpb.RevokeTokenRequest { return &coordpb.RevokeTokenRequest{} }, s.RevokeToken)
	rs = append(rs, route{method: http.MethodPost, path: "/v1/tokens/revoke", newReq: nr, call: c})
	return rs
}
