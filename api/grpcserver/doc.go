// Package grpcserver implements coordd's gRPC services. Every handler is
// an adapter: it converts the request into a controller's checked type
// (datapath.NewSave, …), forwards to the leader when this node is not it,
// calls the controller's service (or reads state, for a read), and maps
// the result and any error through the one error table in errors.go.
// Business rules live in fsm/ (guards) and controller/ (the services and
// leader memory), never here. What stays here is the API's own: request
// forwarding, read consistency, watch streams, limits, and who may speak
// for a streaming node (owner.go, docs/security.md#per-node-identity).
package grpcserver
