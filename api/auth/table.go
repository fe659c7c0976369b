package auth

import "strings"

// methodRoles is the one table of gRPC methods: the role each needs. A
// method missing here needs admin (MethodRole); TestEveryMethodHasARow in
// api/grpcserver fails for any registered coordd method without a row.
// RoleNode marks the calls that speak for a streaming node: the handler
// also checks that the caller's node identity is the one the named session
// was registered with (auth.SpeaksFor); TestRoleMatrix in api/grpcserver
// holds a hand-written expectation for every row.
var methodRoles = map[string]Role{
	"/coordd.v1.Cluster/Status":         RoleRead,
	"/coordd.v1.Cluster/Members":        RoleRead,
	"/coordd.v1.Cluster/AddVoter":       RoleAdmin,
	"/coordd.v1.Cluster/RemoveMember":   RoleAdmin,
	"/coordd.v1.Cluster/TransferLeader": RoleAdmin,
	"/coordd.v1.Cluster/RegisterMember": RoleAdmin, // members register themselves with their server certificate
	"/coordd.v1.Cluster/Snapshot":       RoleAdmin,

	"/coordd.v1.Allocator/AllocTimestamp": RoleProxy,
	"/coordd.v1.Allocator/AllocID":        RoleProxy,

	"/coordd.v1.Channels/ListPChannels":                RoleRead,
	"/coordd.v1.Channels/AddPChannels":                 RoleAdmin,
	"/coordd.v1.Channels/Rebalance":                    RoleAdmin,
	"/coordd.v1.Channels/ListNodes":                    RoleRead,
	"/coordd.v1.Channels/DrainNode":                    RoleAdmin,
	"/coordd.v1.Channels/UndrainNode":                  RoleAdmin,
	"/coordd.v1.Channels/AllocVirtualChannels":         RoleProxy, // proxies creating a collection
	"/coordd.v1.Channels/DropVirtualChannels":          RoleProxy,
	"/coordd.v1.Channels/ListVirtualChannels":          RoleRead,
	"/coordd.v1.Channels/UpdateReplicateConfiguration": RoleAdmin,
	"/coordd.v1.Channels/ResetReplicateRole":           RoleAdmin,
	"/coordd.v1.Channels/GetReplicateConfiguration":    RoleRead,
	"/coordd.v1.Channels/WatchAssignments":             RoleRead,
	"/coordd.v1.Channels/ReportAssignmentError":        RoleProxy,

	"/coordd.v1.StreamingNodeRegistry/RegisterStreamingNode": RoleNode,
	"/coordd.v1.StreamingNodeRegistry/Heartbeat":             RoleNode,
	"/coordd.v1.StreamingNodeRegistry/RequestDrain":          RoleNode,
	"/coordd.v1.StreamingNodeRegistry/Deregister":            RoleNode,

	"/coordd.v1.Broadcaster/Broadcast":        RoleProxy, // proxies broadcasting DDL
	"/coordd.v1.Broadcaster/Ack":              RoleNode,
	"/coordd.v1.Broadcaster/GetBroadcast":     RoleRead,
	"/coordd.v1.Broadcaster/ListBroadcasts":   RoleRead,
	"/coordd.v1.Broadcaster/RetryBroadcast":   RoleAdmin,
	"/coordd.v1.Broadcaster/AbandonBroadcast": RoleAdmin,

	// Milvus 2.6's StreamingCoord services (docs/milvus.md), with the
	// roles of the coordd calls they become.
	"/milvus.proto.streaming.StreamingCoordBroadcastService/Broadcast":                     RoleProxy,
	"/milvus.proto.streaming.StreamingCoordBroadcastService/Ack":                           RoleNode,
	"/milvus.proto.streaming.StreamingCoordAssignmentService/AssignmentDiscover":           RoleProxy, // report_error is ReportAssignmentError's
	"/milvus.proto.streaming.StreamingCoordAssignmentService/UpdateReplicateConfiguration": RoleAdmin,
	"/milvus.proto.streaming.StreamingCoordAssignmentService/UpdateWALBalancePolicy":       RoleAdmin,

	"/coordd.v1.DataCoord/AssignSegmentID":          RoleNode,
	"/coordd.v1.DataCoord/ReportTimeTicks":          RoleNode,
	"/coordd.v1.DataCoord/WatchFlushTasks":          RoleNode,
	"/coordd.v1.DataCoord/SaveBinlogPaths":          RoleNode,
	"/coordd.v1.DataCoord/CreateImportSegment":      RoleNode, // import and copy jobs on the VChannel's owner
	"/coordd.v1.DataCoord/FinishImportSegment":      RoleNode,
	"/coordd.v1.DataCoord/UpdateChannelCheckpoints": RoleNode,
	"/coordd.v1.DataCoord/GetRecoveryInfo":          RoleProxy,
	"/coordd.v1.DataCoord/Flush":                    RoleProxy, // proxies flushing for users
	"/coordd.v1.DataCoord/FlushAll":                 RoleProxy,
	"/coordd.v1.DataCoord/GetFlushState":            RoleRead,
	"/coordd.v1.DataCoord/GetFlushAllState":         RoleRead,
	"/coordd.v1.DataCoord/GetSegmentInfo":           RoleRead,
	"/coordd.v1.DataCoord/ListSegments":             RoleRead,
	"/coordd.v1.DataCoord/ListChannelCheckpoints":   RoleRead,

	// Manifests: publications come from the data path (compaction, index
	// builds, imports) like SaveBinlogPaths; the orphan collector deletes
	// objects, so running it on demand is admin (coordctl manifest gc).
	"/coordd.v1.ManifestService/CommitSegmentManifest":      RoleProxy,
	"/coordd.v1.ManifestService/CommitSegmentManifestBatch": RoleProxy,
	"/coordd.v1.ManifestService/GetSegmentManifest":         RoleRead,
	"/coordd.v1.ManifestService/CollectManifestOrphans":     RoleAdmin,

	// Diagnostics: recent error lines can quote request contents (keys,
	// names), so they are admin like profiles; the level itself is not
	// secret.
	"/coordd.v1.Diagnostics/GetLogLevel":  RoleRead,
	"/coordd.v1.Diagnostics/SetLogLevel":  RoleAdmin,
	"/coordd.v1.Diagnostics/RecentErrors": RoleAdmin,

	// A backup holds the whole state, token hashes included.
	"/coordd.v1.Backup/SaveSnapshot": RoleAdmin,

	"/coordd.v1.Tokens/CreateToken": RoleAdmin,
	"/coordd.v1.Tokens/ListTokens":  RoleAdmin,
	"/coordd.v1.Tokens/RevokeToken": RoleAdmin,
}

// serviceRoles covers whole standard services coordd registers but does
// not define: probes need nothing, reflection (grpcurl) needs read.
var serviceRoles = map[string]Role{
	"grpc.health.v1.Health":                    RoleNone,
	"grpc.reflection.v1.ServerReflection":      RoleRead,
	"grpc.reflection.v1alpha.ServerReflection": RoleRead,
}

// MethodRole is the role a gRPC method (full name "/pkg.Service/Method")
// needs; known=false means it has no row and gets admin.
func MethodRole(fullMethod string) (role Role, known bool) {
	if r, ok := methodRoles[fullMethod]; ok {
		return r, true
	}
	svc, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if r, ok := serviceRoles[svc]; ok {
		return r, true
	}
	return RoleAdmin, false
}

// routeRoles is the one table of HTTP routes, keyed by the gateway's
// ServeMux pattern. A route missing here needs admin (RouteRole);
// TestEveryRouteHasARow in api/httpgateway fails for any served route
// without a row.
var routeRoles = map[string]Role{
	"/":                RoleNone, // the not-found / method-not-allowed answer
	"GET /healthz":     RoleNone,
	"GET /readyz":      RoleNone,
	"GET /metrics":     RoleRead,
	"GET /v1/snapshot": RoleAdmin,

	"GET /v1/cluster/status":           RoleRead,
	"GET /v1/cluster/members":          RoleRead,
	"POST /v1/cluster/members":         RoleAdmin,
	"POST /v1/cluster/members/remove":  RoleAdmin,
	"POST /v1/cluster/transfer-leader": RoleAdmin,
	"POST /v1/cluster/register":        RoleAdmin,
	"POST /v1/alloc/timestamp":         RoleProxy,
	"POST /v1/alloc/id":                RoleProxy,

	"GET /v1/pchannels":               RoleRead,
	"POST /v1/pchannels":              RoleAdmin,
	"POST /v1/pchannels/rebalance":    RoleAdmin,
	"POST /v1/pchannels/report-error": RoleProxy,
	"GET /v1/nodes":                   RoleRead,
	"POST /v1/nodes/drain":            RoleAdmin,
	"POST /v1/nodes/undrain":          RoleAdmin,
	"POST /v1/nodes/register":         RoleNode,
	"POST /v1/nodes/heartbeat":        RoleNode,
	"POST /v1/vchannels":              RoleProxy,
	"POST /v1/vchannels/drop":         RoleProxy,
	"GET /v1/vchannels":               RoleRead,
	"POST /v1/replicate-config":       RoleAdmin,
	"POST /v1/replicate-config/reset": RoleAdmin,
	"GET /v1/replicate-config":        RoleRead,

	"POST /v1/broadcasts":         RoleProxy,
	"GET /v1/broadcasts":          RoleRead,
	"GET /v1/broadcasts/get":      RoleRead,
	"POST /v1/broadcasts/ack":     RoleNode,
	"POST /v1/broadcasts/retry":   RoleAdmin,
	"POST /v1/broadcasts/abandon": RoleAdmin,

	"POST /v1/segments/assign":        RoleNode,
	"POST /v1/timeticks":              RoleNode,
	"GET /v1/flush-tasks":             RoleNode,
	"POST /v1/segments/binlogs":       RoleNode,
	"POST /v1/segments/import":        RoleNode,
	"POST /v1/segments/import/finish": RoleNode,
	"POST /v1/checkpoints":            RoleNode,
	"GET /v1/checkpoints":             RoleRead,
	"GET /v1/recovery-info":           RoleProxy,
	"POST /v1/flush":                  RoleProxy,
	"POST /v1/flush-all":              RoleProxy,
	"POST /v1/flush/state":            RoleRead,
	"POST /v1/flush-all/state":        RoleRead,
	"POST /v1/segments/info":          RoleRead,
	"GET /v1/segments":                RoleRead,

	"POST /v1/manifests/commit":       RoleProxy,
	"POST /v1/manifests/commit-batch": RoleProxy,
	"GET /v1/manifests":               RoleRead,
	"POST /v1/manifests/gc":           RoleAdmin,

	"GET /v1/admin/log-level":     RoleRead,
	"POST /v1/admin/log-level":    RoleAdmin,
	"GET /v1/admin/recent-errors": RoleAdmin,
	"GET /ui":                     RoleRead, // the status page shows what cluster status and lists show
	"GET /v1/openapi.json":        RoleRead,

	"POST /v1/tokens":        RoleAdmin,
	"GET /v1/tokens":         RoleAdmin,
	"POST /v1/tokens/revoke": RoleAdmin,

	// Profiles reveal memory contents and cost CPU (served only with
	// --enable-pprof).
	"GET /debug/pprof/":        RoleAdmin,
	"GET /debug/pprof/profile": RoleAdmin,
	"GET /debug/pprof/symbol":  RoleAdmin,
	"GET /debug/pprof/trace":   RoleAdmin,

	// Test only (served only with --fault-injection): holds raft messages.
	"GET /debug/raft-delay":       RoleAdmin,
	"POST /debug/raft-delay":      RoleAdmin,
	"POST /debug/replay-snapshot": RoleAdmin,
}

// RouteRole is the role an HTTP route (ServeMux pattern) needs;
// known=false means it has no row and gets admin.
func RouteRole(pattern string) (role Role, known bool) {
	if r, ok := routeRoles[pattern]; ok {
		return r, true
	}
	return RoleAdmin, false
}

// MethodTable returns a copy of the gRPC table (docs and their test).
func MethodTable() map[string]Role { return copyTable(methodRoles) }

// RouteTable returns a copy of the HTTP table (docs and their test).
func RouteTable() map[string]Role { return copyTable(routeRoles) }

func copyTable(m map[string]Role) map[string]Role {
	out := make(map[string]Role, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
