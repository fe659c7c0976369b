package grpcserver

import (
	"context"
	"fmt"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/vocab"
)

// speaksFor is the per-node identity check (docs/security.md#per-node-identity)
// of every call that names a streaming node session: with authentication
// on, the caller must be the node credential the session was registered
// with. It runs on the member that serves the call — the leader for writes
// and leader-memory calls (after forward), any member for the flush-task
// watch — before anything is proposed or changed, so a refused call
// changes nothing. The binding it compares (the session's bound_node) is
// replicated and never changes for a record, and node IDs are never
// reused, so the check cannot race a later write; Apply still runs the
// (node, term) owner check of each command.
//
// An unknown session is refused too: it may have been evicted while a
// PChannel still names it, and no credential can prove it owns one.
//
// On success it returns the caller's node identity (0 with
// authentication off): the handler passes it to the service in the
// service's request, the service stamps the commands it proposes for the
// call with it (commands.CallerNode), and Apply checks the binding again
// (fsm checkCaller).
func (s *Server) speaksFor(ctx context.Context, node uint64) (caller uint64, err error) {
	if s.auth == nil {
		return 0, nil // --insecure: no credentials, no binding
	}
	if node == 0 {
		return 0, s.toStatus(ctx, vocab.Errorf(errInvalid, "node_id is required: the call speaks for a streaming node session"))
	}
	who, ok := auth.IdentityFrom(ctx)
	if !ok {
		return 0, auth.StatusOf(fmt.Errorf("%w: no authenticated caller", auth.ErrPermissionDenied))
	}
	n, found := s.node.State().StreamingNode(node)
	if !found {
		return 0, auth.StatusOf(fmt.Errorf("%w: streaming node %d is not registered, so no credential may speak for it", auth.ErrPermissionDenied, node))
	}
	if err := auth.SpeaksFor(who, node, n.BoundNode); err != nil {
		return 0, auth.StatusOf(err)
	}
	return who.Node, nil
}

// callerNode is the node identity a registration is bound to: the caller's
// (a node credential; the interceptor admits no other), or 0 without
// authentication.
func (s *Server) callerNode(ctx context.Context) (uint64, error) {
	if s.auth == nil {
		return 0, nil
	}
	who, ok := auth.IdentityFrom(ctx)
	if !ok || who.Role != auth.RoleNode || who.Node == 0 {
		return 0, auth.StatusOf(fmt.Errorf("%w: only a node credential (bound to a node identity) may register a streaming node", auth.ErrPermissionDenied))
	}
	return who.Node, nil
}
