// Package grpcserver implements coordd's gRPC services. Handlers are thin:
// validate the request's shape, forward to the leader when this node is not
// it, then propose a command or read state, and map the result through the
// one error table in errors.go. Business rules live in fsm/ (guards) and
// controller/ (leader memory), never here.
package grpcserver
