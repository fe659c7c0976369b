package main

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/coordd/coordd/vocab"
)

// maxGRPCRecvBytes bounds one request message on the API port.
const maxGRPCRecvBytes = 8 << 20

// grpcTransportOptions are the API port's transport limits. The HTTP/2
// transport applies them to every connection and stream before any
// interceptor (authentication included) runs, so they bound what a caller
// without credentials can make a member hold: message size, metadata size
// (vocab.MaxGRPCHeaderListBytes, 1 MB like the HTTP gateway's headers;
// grpc-go would read 16 MB), streams per connection, keepalive pings and
// the handshake time.
func grpcTransportOptions(l limitFlags) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxGRPCRecvBytes),
		grpc.MaxHeaderListSize(vocab.MaxGRPCHeaderListBytes),
		grpc.MaxConcurrentStreams(uint32(l.GRPCMaxStreams)),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.GRPCKeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.ConnectionTimeout(l.GRPCHandshakeTimeout),
	}
}
