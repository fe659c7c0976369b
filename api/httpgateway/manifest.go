package httpgateway

import (
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
)

// manifestRoutes are the segment manifest routes (docs/semantics.md#manifests).
func manifestRoutes(s *grpcserver.Server) []route {
	var rs []route
	add := func(method, path string, newReq func() proto.Message, call rpcCall) {
		rs = append(rs, route{method: method, path: path, newReq: newReq, call: call})
	}
	nr, c := rpc(func() *coordpb.CommitSegmentManifestRequest { return &coordpb.CommitSegmentManifestRequest{} }, s.CommitSegmentManifest)
	add(http.MethodPost, "/v1/manifests/commit", nr, c)
	nr, c = rpc(func() *coordpb.CommitSegmentManifestBatchRequest { return &coordpb.CommitSegmentManifestBatchRequest{} }, s.CommitSegmentManifestBatch)
	add(http.MethodPost, "/v1/manifests/commit-batch", nr, c)
	nr, c = rpc(func() *coordpb.GetSegmentManifestRequest { return &coordpb.GetSegmentManifestRequest{} }, s.GetSegmentManifest)
	add(http.MethodGet, "/v1/manifests", nr, c)
	nr, c = rpc(func() *coordpb.CollectManifestOrphansRequest { return &coordpb.CollectManifestOrphansRequest{} }, s.CollectManifestOrphans)
	add(http.MethodPost, "/v1/manifests/gc", nr, c)
	return rs
}
