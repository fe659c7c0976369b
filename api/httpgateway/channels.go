package httpgateway

import (
	"net/http"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
)

// channelRoutes are the channel-management and streaming-node endpoints.
func channelRoutes(s *grpcserver.Server) []route {
	var rs []route
	add := func(method, path string, newReq func() proto.Message, call rpcCall) {
		rs = append(rs, route{method: method, path: path, newReq: newReq, call: call})
	}
	nr, c := rpc(func() *coordpb.ListPChannelsRequest { return &coordpb.ListPChannelsRequest{} }, s.ListPChannels)
	add(http.MethodGet, "/v1/pchannels", nr, c)
	nr, c = rpc(func() *coordpb.AddPChannelsRequest { return &coordpb.AddPChannelsRequest{} }, s.AddPChannels)
	add(http.MethodPost, "/v1/pchannels", nr, c)
	nr, c = rpc(func() *coordpb.RebalanceRequest { return &coordpb.RebalanceRequest{} }, s.Rebalance)
	add(http.MethodPost, "/v1/pchannels/rebalance", nr, c)
	nr, c = rpc(func() *coordpb.ListNodesRequest { return &coordpb.ListNodesRequest{} }, s.ListNodes)
	add(http.MethodGet, "/v1/nodes", nr, c)
	nr, c = rpc(func() *coordpb.DrainNodeRequest { return &coordpb.DrainNodeRequest{} }, s.DrainNode)
	add(http.MethodPost, "/v1/nodes/drain", nr, c)
	nr, c = rpc(func() *coordpb.DrainNodeRequest { return &coordpb.DrainNodeRequest{} }, s.UndrainNode)
	add(http.MethodPost, "/v1/nodes/undrain", nr, c)
	nr, c = rpc(func() *coordpb.AllocVirtualChannelsRequest { return &coordpb.AllocVirtualChannelsRequest{} }, s.AllocVirtualChannels)
	add(http.MethodPost, "/v1/vchannels", nr, c)
	nr, c = rpc(func() *coordpb.DropVirtualChannelsRequest { return &coordpb.DropVirtualChannelsRequest{} }, s.DropVirtualChannels)
	add(http.MethodPost, "/v1/vchannels/drop", nr, c)
	nr, c = rpc(func() *coordpb.ListVirtualChannelsRequest { return &coordpb.ListVirtualChannelsRequest{} }, s.ListVirtualChannels)
	add(http.MethodGet, "/v1/vchannels", nr, c)
	nr, c = rpc(func() *coordpb.UpdateReplicateConfigurationRequest {
		return &coordpb.UpdateReplicateConfigurationRequest{}
	}, s.UpdateReplicateConfiguration)
	add(http.MethodPost, "/v1/replicate-config", nr, c)
	nr, c = rpc(func() *coordpb.ResetReplicateRoleRequest { return &coordpb.ResetReplicateRoleRequest{} }, s.ResetReplicateRole)
	add(http.MethodPost, "/v1/replicate-config/reset", nr, c)
	nr, c = rpc(func() *coordpb.GetReplicateConfigurationRequest { return &coordpb.GetReplicateConfigurationRequest{} }, s.GetReplicateConfiguration)
	add(http.MethodGet, "/v1/replicate-config", nr, c)
	nr, c = rpc(func() *coordpb.ReportAssignmentErrorRequest { return &coordpb.ReportAssignmentErrorRequest{} }, s.ReportAssignmentError)
	add(http.MethodPost, "/v1/pchannels/report-error", nr, c)
	nr, c = rpc(func() *coordpb.RegisterStreamingNodeRequest { return &coordpb.RegisterStreamingNodeRequest{} }, s.RegisterStreamingNode)
	add(http.MethodPost, "/v1/nodes/register", nr, c)
	nr, c = rpc(func() *coordpb.HeartbeatRequest { return &coordpb.HeartbeatRequest{} }, s.Heartbeat)
	add(http.MethodPost, "/v1/nodes/heartbeat", nr, c)
	return rs
}
