package grpcserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

// WithAuth turns on authentication and authorisation (docs/security.md):
// AuthInterceptors and the HTTP gateway check every call against the
// tables of package auth, with tokens looked up in this node's FSM.
func WithAuth() Option {
	return func(s *Server) {
		s.auth = auth.New(func(id string) (*logpb.TokenRecord, bool) { return s.node.State().Token(id) }).
			WithCatchUp(s.tokensMayLag)
	}
}

// WithPeerTLS makes calls forwarded to the leader use TLS with cfg (the
// member's server certificate, which lets the leader trust the forwarded
// caller role) instead of plaintext.
func WithPeerTLS(cfg *tls.Config) Option { return func(s *Server) { s.peerTLS = cfg } }

// PeerTLS is the client TLS configuration for calls to other members
// (their server certificate is verified; this member's is presented), nil
// on a plaintext cluster.
func (s *Server) PeerTLS() *tls.Config { return s.peerTLS }

// Authenticator is the server's authenticator, nil when authentication is
// disabled.
func (s *Server) Authenticator() *auth.Authenticator { return s.auth }

// AuthInterceptors are the gRPC server options that check every call, or
// none when authentication is disabled. They must run before any handler.
func (s *Server) AuthInterceptors() []grpc.ServerOption {
	if s.auth == nil {
		return nil
	}
	return s.auth.Interceptors()
}

// CreateToken draws a token, commits its hash with the requested role, and
// returns the secret (the only time it is shown). InvalidArgument for a bad
// role or name; ResourceExhausted when the table is full.
func (s *Server) CreateToken(ctx context.Context, req *coordpb.CreateTokenRequest) (*coordpb.CreateTokenResponse, error) {
	cmd, tok, err := newTokenCommand(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.CreateTokenResponse, error) {
		return coordpb.NewTokensClient(c).CreateToken(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if _, err := s.commit(ctx, cmd); err != nil {
		return nil, err
	}
	// The reply shows the record as Apply stored it (its creation time).
	stored, ok := s.node.State().Token(tok.ID)
	if !ok { // revoked since the commit
		return nil, s.toStatus(ctx, fmt.Errorf("%w: token %s was revoked right after its creation", errNotFound, tok.ID))
	}
	return &coordpb.CreateTokenResponse{Token: apiToken(stored), Secret: tok.String()}, nil
}

// newTokenCommand checks a CreateToken request and draws its token: the
// CreateToken command holding the secret's hash, and the token itself.
func newTokenCommand(req *coordpb.CreateTokenRequest) (commands.Command, auth.Token, error) {
	role, err := auth.ParseRole(req.Role)
	if err != nil {
		return commands.Command{}, auth.Token{}, fmt.Errorf("%w: %v", errInvalid, err)
	}
	switch {
	case role == auth.RoleNode && req.NodeId == 0:
		return commands.Command{}, auth.Token{}, fmt.Errorf("%w: a node token is bound to one streaming node: give node_id (coordctl token create node --node-id N); proxies use role proxy", errInvalid)
	case role != auth.RoleNode && req.NodeId != 0:
		return commands.Command{}, auth.Token{}, fmt.Errorf("%w: node_id is only for role node, not %s", errInvalid, role)
	}
	tok, err := auth.NewToken()
	if err != nil {
		return commands.Command{}, auth.Token{}, err
	}
	rec := &logpb.TokenRecord{Id: tok.ID, Name: req.Name, Role: role.TokenRole(), SecretSha256: tok.SecretHash(), NodeId: req.NodeId}
	cmd, err := commands.New(&logpb.CreateToken{Token: rec}, "")
	return cmd, tok, err
}

// ListTokens lists every token (never a secret or its hash). The read is
// linearizable on any member (forwarded to the leader, which confirms its
// leadership and waits for its commit index): a token whose creation was
// acknowledged is listed, even by a follower that has not applied it yet.
func (s *Server) ListTokens(ctx context.Context, req *coordpb.ListTokensRequest) (*coordpb.ListTokensResponse, error) {
	st, resp, done, err := readState(s, ctx, coordpb.ReadConsistency_LINEARIZABLE, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.ListTokensResponse, error) {
		return coordpb.NewTokensClient(c).ListTokens(ctx, req, o...)
	})
	if done {
		return resp, err
	}
	out := &coordpb.ListTokensResponse{}
	for _, t := range st.Tokens() {
		out.Tokens = append(out.Tokens, apiToken(t))
	}
	return out, nil
}

// RevokeToken deletes a token; NotFound for an unknown ID.
func (s *Server) RevokeToken(ctx context.Context, req *coordpb.RevokeTokenRequest) (*coordpb.RevokeTokenResponse, error) {
	cmd, err := commands.New(&logpb.RevokeToken{Id: req.Id}, "")
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RevokeTokenResponse, error) {
		return coordpb.NewTokensClient(c).RevokeToken(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if _, err := s.commit(ctx, cmd); err != nil {
		return nil, err
	}
	return &coordpb.RevokeTokenResponse{}, nil
}

func apiToken(t *logpb.TokenRecord) *coordpb.TokenInfo {
	// A node record without a node ID predates per-node identity; it is
	// listed as what it grants (proxy).
	role, node := auth.FromTokenRecord(t)
	return &coordpb.TokenInfo{Id: t.Id, Name: t.Name, Role: role.String(),
		CreatedUnixMs: t.CreatedMs, Bootstrap: t.Bootstrap, NodeId: node}
}

// BootstrapTokenRoutine is a leader routine that installs tok as the
// cluster's admin bootstrap token once: it does nothing when a bootstrap
// token was ever installed (so a revoked one stays revoked), and retries a
// failed proposal until it succeeds or the term ends.
func BootstrapTokenRoutine(node *raftnode.Node, tok auth.Token, logger interface {
	Info(string, ...any)
	Warn(string, ...any)
}) raftnode.LeaderRoutine {
	return func(ctx context.Context, term uint64, p commands.Proposer) {
		rec := &logpb.TokenRecord{Id: tok.ID, Name: "bootstrap", Role: logpb.TokenRole_TOKEN_ROLE_ADMIN,
			SecretSha256: tok.SecretHash(), Bootstrap: true}
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			if node.State().BootstrapTokenInstalled() {
				return
			}
			_, err := commands.CommitNew(ctx, p, &logpb.CreateToken{Token: rec}, "")
			var rej *commands.RejectedError
			switch {
			case err == nil:
				logger.Info("installed the bootstrap admin token", "token_id", tok.ID, "term", term)
				return
			case errors.As(err, &rej):
				logger.Warn("bootstrap token refused", "token_id", tok.ID, "reason", rej.Message)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// tokensMayLag: a member's token table may miss a committed token while
// it has not applied the log it holds. See tokenTableMayLag.
func (s *Server) tokensMayLag() (bool, string) {
	return tokenTableMayLag(s.node.IsLeader(), s.node.EstablishedTerm(), func() (bool, string) {
		r := s.node.Readiness(0)
		return r.Ready, r.Status
	})
}

// tokenTableMayLag judges whether a member's token table may miss a
// committed token. A leader's holds every token once it is established:
// establishing applies everything earlier leaders committed (a barrier)
// before EstablishedTerm is set. Until then a new leader — one just
// restarted, say, replaying nothing yet — may miss tokens every member
// acknowledged. A follower's may miss them while it knows no leader, has
// heard no commit index yet (just restarted), or has not applied
// everything the leader told it is committed (ready reports that).
func tokenTableMayLag(leader bool, establishedTerm uint64, ready func() (bool, string)) (bool, string) {
	if leader {
		if establishedTerm != 0 {
			return false, ""
		}
		return true, "was just elected and has not yet applied the log it inherited"
	}
	if ok, why := ready(); !ok {
		return true, "is not caught up with the log (" + why + ")"
	}
	return false, ""
}
