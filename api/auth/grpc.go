package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Interceptors returns the unary and stream interceptors that check every
// call against the method table before the handler runs.
func (a *Authenticator) Interceptors() []grpc.ServerOption {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := a.check(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, err := a.check(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return h(srv, &identityStream{ServerStream: ss, ctx: ctx})
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }

// check authenticates and authorises one call; the returned context carries
// the caller's Identity.
func (a *Authenticator) check(ctx context.Context, method string) (context.Context, error) {
	need, _ := MethodRole(method)
	if need == RoleNone {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	c := Credentials{Authorization: first(md, "authorization"), CallerRole: first(md, MDCallerRole),
		CallerNode: first(md, MDCallerNode), PeerCert: grpcPeerCert(ctx)}
	who, err := a.Authenticate(c)
	if err == nil {
		err = Authorize(who, need)
	}
	if err != nil {
		if errors.Is(err, ErrNotCaughtUp) {
			// Nothing was done: the mark every coordd Unavailable answer
			// carries, so the client retries it as a known outcome.
			_ = grpc.SetTrailer(ctx, metadata.Pairs(mdOutcome, outcomeNone))
		}
		return ctx, StatusOf(err)
	}
	return WithIdentity(ctx, who), nil
}

// mdOutcome and outcomeNone are the API's "nothing was done" mark on an
// Unavailable answer (grpcserver.MDOutcome, client.OutcomeNone).
const (
	mdOutcome   = "coordd-outcome"
	outcomeNone = "none"
)

// StatusOf maps ErrUnauthenticated, ErrPermissionDenied and ErrNotCaughtUp
// to their gRPC codes.
func StatusOf(err error) error {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, ErrPermissionDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrNotCaughtUp):
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// grpcPeerCert is the caller's verified client certificate, or nil.
func grpcPeerCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0]
}

// OutgoingCaller returns ctx with the caller's role (and node, for a node
// caller) added for a call forwarded to another member (a no-op without an
// identity in ctx).
func OutgoingCaller(ctx, out context.Context) context.Context {
	who, ok := IdentityFrom(ctx)
	if !ok {
		return out
	}
	if who.Role == RoleNode {
		return metadata.AppendToOutgoingContext(out, MDCallerRole, who.Role.String(), MDCallerNode, strconv.FormatUint(who.Node, 10))
	}
	return metadata.AppendToOutgoingContext(out, MDCallerRole, who.Role.String())
}
