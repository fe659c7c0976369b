package auth

import (
	"context"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/security"
)

// MDCallerRole is the metadata key in which a member forwarding a call to
// the leader names the original caller's role; MDCallerNode names the node
// identity of a node caller. Both are honoured only from a peer presenting
// the server certificate.
const (
	MDCallerRole = "coordd-caller-role"
	MDCallerNode = "coordd-caller-node"
)

var (
	// ErrUnauthenticated: no usable credentials (none, malformed, unknown
	// or revoked token). Answered Unauthenticated / 401.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrPermissionDenied: the caller's role is below the method's.
	// Answered PermissionDenied / 403.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrNotCaughtUp: the token is unknown here, but this member may not
	// have applied the entry that created it yet (it is restarting,
	// replaying its log, or trails the leader). Answered Unavailable / 503
	// so a client retries, on another member or later, instead of taking a
	// valid credential for a revoked one.
	ErrNotCaughtUp = errors.New("member not caught up")
)

// CatchUp says whether this member's token table may miss a token the
// cluster has committed, and why ("" when it is current).
type CatchUp func() (behind bool, why string)

// TokenLookup finds a token record by ID in the replicated state (an
// in-memory map lookup: the hot path never touches raft or disk).
type TokenLookup func(id string) (*logpb.TokenRecord, bool)

// Authenticator turns credentials into an Identity.
type Authenticator struct {
	lookup  TokenLookup
	catchUp CatchUp
}

// New returns an authenticator over the token table.
func New(lookup TokenLookup) *Authenticator { return &Authenticator{lookup: lookup} }

// WithCatchUp makes an unknown token answer ErrNotCaughtUp while behind
// says this member may not have applied it yet.
func (a *Authenticator) WithCatchUp(behind CatchUp) *Authenticator {
	a.catchUp = behind
	return a
}

// Identity is an authenticated caller.
type Identity struct {
	Role Role
	// Node is the streaming node identity a RoleNode caller is bound to
	// (always > 0 then); 0 for every other role.
	Node uint64
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
	// CallerRole and CallerNode are the MDCallerRole and MDCallerNode
	// metadata ("" when absent).
	CallerRole, CallerNode string
}

// Authenticate identifies the caller. In order: a coordd server (server
// certificate) is admin, or the forwarded caller's role (and node) when it
// names one; a bearer token gets its record's role and node; a client
// certificate gets the node it names (NodeURIPrefix) or its role URI.
// Anything else is ErrUnauthenticated. Forwarding metadata from anyone but
// a server is ignored, so it can neither elevate a caller nor claim a node.
func (a *Authenticator) Authenticate(c Credentials) (Identity, error) {
	if security.IsServerCert(c.PeerCert) {
		return forwarded(c)
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
		if !ok && a.catchUp != nil {
			if behind, why := a.catchUp(); behind {
				return Identity{}, fmt.Errorf("%w: token %s is not known on this member, which %s: try another member or retry",
					ErrNotCaughtUp, tok.ID, why)
			}
		}
		if subtle.ConstantTimeCompare(tok.SecretHash(), want) != 1 || !ok {
			return Identity{}, fmt.Errorf("%w: unknown or revoked token %s", ErrUnauthenticated, tok.ID)
		}
		role, node := FromTokenRecord(rec)
		if role == RoleNone {
			return Identity{}, fmt.Errorf("%w: token %s has no usable role", ErrUnauthenticated, tok.ID)
		}
		return Identity{Role: role, Node: node, Subject: fmt.Sprintf("token:%s (%s)", rec.Id, rec.Name)}, nil
	}
	if c.PeerCert != nil {
		return certIdentity(c.PeerCert)
	}
	return Identity{}, fmt.Errorf("%w: no credentials: send \"authorization: Bearer <token>\" or a client certificate with a role", ErrUnauthenticated)
}

// forwarded is the identity of a call from a member: admin, or the caller
// it forwards (role, and node for a node caller).
func forwarded(c Credentials) (Identity, error) {
	if c.CallerRole == "" {
		if c.CallerNode != "" {
			return Identity{}, fmt.Errorf("%w: forwarded caller node without a role", ErrUnauthenticated)
		}
		return Identity{Role: RoleAdmin, Subject: "server"}, nil
	}
	r, err := ParseRole(c.CallerRole)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: forwarded caller role: %v", ErrUnauthenticated, err)
	}
	who := Identity{Role: r, Subject: "forwarded:" + r.String()}
	switch {
	case r == RoleNode:
		n, err := strconv.ParseUint(c.CallerNode, 10, 64)
		if err != nil || n == 0 {
			return Identity{}, fmt.Errorf("%w: forwarded node caller without a valid node identity (%q)", ErrUnauthenticated, c.CallerNode)
		}
		who.Node, who.Subject = n, fmt.Sprintf("forwarded:node %d", n)
	case c.CallerNode != "":
		return Identity{}, fmt.Errorf("%w: forwarded %s caller names a node", ErrUnauthenticated, r)
	}
	return who, nil
}

// certIdentity is what a client certificate grants: the node role bound to
// the node it names, else the role of its role URI. A legacy
// spiffe://coordd/role/node certificate without a node identity has the
// proxy's rights, like an unbound node token.
func certIdentity(cert *x509.Certificate) (Identity, error) {
	subject := fmt.Sprintf("cert:%v", cert.URIs)
	node, err := security.CertNode(cert)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: client certificate: %v", ErrUnauthenticated, err)
	}
	name, err := security.CertRole(cert)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: client certificate: %v", ErrUnauthenticated, err)
	}
	if node != 0 {
		if name != "" && name != "node" {
			return Identity{}, fmt.Errorf("%w: client certificate names node %d and role %q", ErrUnauthenticated, node, name)
		}
		return Identity{Role: RoleNode, Node: node, Subject: subject}, nil
	}
	if name == "" {
		return Identity{}, fmt.Errorf("%w: client certificate carries no role; send a token as well", ErrUnauthenticated)
	}
	r, err := ParseRole(name)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: client certificate: %v", ErrUnauthenticated, err)
	}
	if r == RoleNode {
		r = RoleProxy
	}
	return Identity{Role: r, Subject: subject}, nil
}

// Authorize checks that who may call something that needs role need.
func Authorize(who Identity, need Role) error {
	if who.Role.Includes(need) && (need != RoleNode || who.Node != 0) {
		return nil
	}
	if need == RoleNode {
		return fmt.Errorf("%w: %s has role %s; this call speaks for a streaming node and needs that node's own credential (a node token or certificate bound to it)",
			ErrPermissionDenied, who.Subject, who.Role)
	}
	return fmt.Errorf("%w: %s has role %s; this call needs %s", ErrPermissionDenied, who.Subject, who.Role, need)
}

// SpeaksFor checks that who may speak for a streaming node session bound to
// node identity bound: who must be a node credential of that identity. A
// session registered without authentication (bound 0) has no owner any
// credential can prove, so no one may speak for it while authentication is
// on.
func SpeaksFor(who Identity, session, bound uint64) error {
	if who.Role == RoleNode && who.Node != 0 && who.Node == bound {
		return nil
	}
	if bound == 0 {
		return fmt.Errorf("%w: streaming node %d registered without a node credential; restart it with one (docs/security.md#per-node-identity)", ErrPermissionDenied, session)
	}
	return fmt.Errorf("%w: %s may not speak for streaming node %d (node identity %d)", ErrPermissionDenied, who.Subject, session, bound)
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
