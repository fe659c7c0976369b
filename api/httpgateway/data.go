package httpgateway

import (
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
)

// dataRoutes are the write path's routes (docs/semantics.md#segments).
// Calls with lists of IDs are POSTs (a query string carries one value per
// key); WatchFlushTasks is a stream in gRPC and a snapshot of the current
// task set here.
func dataRoutes(s *grpcserver.Server) []route {
	var rs []route
	add := func(method, path string, newReq func() proto.Message, call rpcCall) {
		rs = append(rs, route{method: method, path: path, newReq: newReq, call: call})
	}
	nr, c := rpc(func() *coordpb.AssignSegmentIDRequest { return &coordpb.AssignSegmentIDRequest{} }, s.AssignSegmentID)
	add(http.MethodPost, "/v1/segments/assign", nr, c)
	nr, c = rpc(func() *coordpb.ReportTimeTicksRequest { return &coordpb.ReportTimeTicksRequest{} }, s.ReportTimeTicks)
	add(http.MethodPost, "/v1/timeticks", nr, c)
	nr, c = rpc(func() *coordpb.WatchFlushTasksRequest { return &coordpb.WatchFlushTasksRequest{} }, s.CurrentFlushTasks)
	add(http.MethodGet, "/v1/flush-tasks", nr, c)
	nr, c = rpc(func() *coordpb.SaveBinlogPathsRequest { return &coordpb.SaveBinlogPathsRequest{} }, s.SaveBinlogPaths)
	add(http.MethodPost, "/v1/segments/binlogs", nr, c)
	nr, c = rpc(func() *coordpb.CreateImportSegmentRequest { return &coordpb.CreateImportSegmentRequest{} }, s.CreateImportSegment)
	add(http.MethodPost, "/v1/segments/import", nr, c)
	nr, c = rpc(func() *coordpb.FinishImportSegmentRequest { return &coordpb.FinishImportSegmentRequest{} }, s.FinishImportSegment)
	add(http.MethodPost, "/v1/segments/import/finish", nr, c)
	nr, c = rpc(func() *coordpb.UpdateChannelCheckpointsRequest { return &coordpb.UpdateChannelCheckpointsRequest{} }, s.UpdateChannelCheckpoints)
	add(http.MethodPost, "/v1/checkpoints", nr, c)
	nr, c = rpc(func() *coordpb.ListChannelCheckpointsRequest { return &coordpb.ListChannelCheckpointsRequest{} }, s.ListChannelCheckpoints)
	add(http.MethodGet, "/v1/checkpoints", nr, c)
	nr, c = rpc(func() *coordpb.GetRecoveryInfoRequest { return &coordpb.GetRecoveryInfoRequest{} }, s.GetRecoveryInfo)
	add(http.MethodGet, "/v1/recovery-info", nr, c)
	nr, c = rpc(func() *coordpb.FlushRequest { return &coordpb.FlushRequest{} }, s.Flush)
	add(http.MethodPost, "/v1/flush", nr, c)
	nr, c = rpc(func() *coordpb.FlushAllRequest { return &coordpb.FlushAllRequest{} }, s.FlushAll)
	add(http.MethodPost, "/v1/flush-all", nr, c)
	nr, c = rpc(func() *coordpb.GetFlushStateRequest { return &coordpb.GetFlushStateRequest{} }, s.GetFlushState)
	add(http.MethodPost, "/v1/flush/state", nr, c)
	nr, c = rpc(func() *coordpb.GetFlushAllStateRequest { return &coordpb.GetFlushAllStateRequest{} }, s.GetFlushAllState)
	add(http.MethodPost, "/v1/flush-all/state", nr, c)
	nr, c = rpc(func() *coordpb.GetSegmentInfoRequest { return &coordpb.GetSegmentInfoRequest{} }, s.GetSegmentInfo)
	add(http.MethodPost, "/v1/segments/info", nr, c)
	nr, c = rpc(func() *coordpb.ListSegmentsRequest { return &coordpb.ListSegmentsRequest{} }, s.ListSegments)
	add(http.MethodGet, "/v1/segments", nr, c)
	return rs
}
