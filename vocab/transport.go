package vocab

// MaxGRPCHeaderListBytes bounds the metadata (HTTP/2 header list) a gRPC
// server of this project reads for one call: coordd's API port and the
// streaming node's port. The HTTP/2 transport enforces it while it decodes
// the headers, before any interceptor runs, so a caller without
// credentials cannot make a server hold more than this per stream (grpc-go
// would otherwise take 16 MB). It matches the HTTP gateway's header limit
// (net/http's 1 MB); real calls carry a few hundred bytes of metadata.
const MaxGRPCHeaderListBytes = 1 << 20
