package auth

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/security"
)

// MDCallerRole is the metadata key in which a member forwarding a call to
// the leader names the original caller's role.
const MDCallerRole = "coordd-caller-role"

var (
	// ErrUnauthenticated: no usable credentials (none, malformed, unknown
	// or revoked token). Answered Unauthenticated / 401.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: the caller's role is below the method's.
	// Answered PermissionDenied / 403.
	ErrPermissionDenied = errors.New("permission denied")
)

// TokenLookup finds a token record by ID in the replicated state (an
// in-memory map lookup: the hot path never touches raft or disk).
type TokenLookup func(id string) (*logpb.TokenRecord, bool)

// Authenticator turns credentials into an Identity.
type Authenticator struct {
	lookup TokenLookup
}

// New returns an authenticator over the token table.
func New(lookup TokenLookup) *Authenticator { return &Authenticator{lookup: lookup} }

// Identity is an authenticated caller.
type Identity struct {
	Role Role
	// Subject names the caller for logs: "token:<id> (<name>)",
	// "cert:<uri>", "server" or "forwarded:<role>".
	Subject string
}

// Credentials are what a call presented.
type Credentials struct {
	// Authorization is the raw Authorization value ("" when absent).
	Authorization string
	// PeerCert is the verified client certificate (nil without one).
	PeerCert *x509.Certificate
	// CallerRole is the MDCallerRole metadata ("" when absent).
	CallerRole string
}

// Authenticate identifies the caller. In order: a coordd server (server
// certificate) is admin, or the forwarded caller's role when it names one;
// a bearer token gets its record's role; a client certificate with a role
// URI gets that role. Anything else is ErrUnauthenticated.
func (a *Authenticator) Authenticate(c Credentials) (Identity, error) {
	if security.IsServerCert(c.PeerCert) {
		if c.CallerRole == "" {
			return Identity{Role: RoleAdmin, Subject: "server"}, nil
		}
		r, err := ParseRole(c.CallerRole)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: forwarded caller role: %v", ErrUnauthenticated, err)
		}
		return Identity{Role: r, Subject: "forwarded:" + r.String()}, nil
	}
	if c.Authorization != "" {
		tok, err := ParseAuthorization(c.Authorization)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
		}
		rec, ok := a.lookup(tok.ID)
		// Compare hashes in constant time; an unknown ID is compared with a
		// zero hash so both paths cost the same.
		want := make([]byte, 32)
		if ok {
			want = rec.SecretSha256
		}
		if subtle.ConstantTimeCompare(tok.SecretHash(), want) != 1 || !ok {
			return Identity{}, fmt.Errorf("%w: unknown or revoked token %s", ErrUnauthenticated, tok.ID)
		}
		return Identity{Role: FromTokenRole(rec.Role), Subject: fmt.Sprintf("token:%s (%s)", rec.Id, rec.Name)}, nil
	}
	if c.PeerCert != nil {
		if name := security.CertRole(c.PeerCert); name != "" {
			r, err := ParseRole(name)
			if err != nil {
				return Identity{}, fmt.Errorf("%w: client certificate: %v", ErrUnauthenticated, err)
			}
			return Identity{Role: r, Subject: fmt.Sprintf("cert:%v", c.PeerCert.URIs)}, nil
		}
	}
	return Identity{}, fmt.Errorf("%w: no credentials: send \"authorization: Bearer <token>\" or a client certificate with a role", ErrUnauthenticated)
}

// Authorize checks that who may call something that needs role need.
func Authorize(who Identity, need Role) error {
	if who.Role < need {
		return fmt.Errorf("%w: %s has role %s; this call needs %s", ErrPermissionDenied, who.Subject, who.Role, need)
	}
	return nil
}

type identityKey struct{}

// WithIdentity returns ctx carrying the authenticated caller.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the caller put into ctx by the interceptors, if any
// (none when authentication is disabled or the method is public).
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
