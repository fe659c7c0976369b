package grpcserver

import (
	"context"
	"crypto/tls"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/tokens"
)

// WithAuth turns on authentication and authorisation (docs/security.md):
// AuthInterceptors and the HTTP gateway check every call against the
// tables of package auth, with tokens looked up in this node's FSM.
func WithAuth() Option {
	return func(s *Server) {
		s.auth = auth.New(s.tokens.Lookup).WithCatchUp(s.tokensMayLag)
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
	c, err := tokens.NewCreate(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.CreateTokenResponse, error) {
		return coordpb.NewTokensClient(c).CreateToken(ctx, req, o...)
	}); handled {
		return resp, err
	}
	resp, err := s.tokens.Create(ctx, c)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return resp, nil
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
	return &coordpb.ListTokensResponse{Tokens: tokens.List(st)}, nil
}

// RevokeToken deletes a token; NotFound for an unknown ID.
func (s *Server) RevokeToken(ctx context.Context, req *coordpb.RevokeTokenRequest) (*coordpb.RevokeTokenResponse, error) {
	r, err := tokens.NewRevoke(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RevokeTokenResponse, error) {
		return coordpb.NewTokensClient(c).RevokeToken(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if err := s.tokens.Revoke(ctx, r); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.RevokeTokenResponse{}, nil
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
