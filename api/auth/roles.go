package auth

import (
	"fmt"

	"github.com/coordd/coordd/commands/logpb"
)

// Role is what a caller may do, or what a method needs. The roles are not
// one ladder (docs/security.md#roles):
//
//	read  < proxy < admin
//	        proxy < node
//
// A node credential is bound to one streaming node identity and may speak
// for that node (RoleNode methods) and nothing else a proxy cannot do; an
// admin may do everything except speak for a node. Includes is the order.
type Role int

const (
	// RoleNone: no credentials needed (health and readiness probes).
	RoleNone Role = iota
	// RoleRead: status, lists, gets and watches.
	RoleRead
	// RoleProxy: what proxies and tools call without speaking for a
	// streaming node: allocation, VChannel allocation, DDL broadcasts,
	// flushes, manifest commits, recovery information.
	RoleProxy
	// RoleNode: calls that speak for one streaming node (registration,
	// heartbeats, acks, segment allocation, data-path reports). Only a
	// credential bound to that node may make them (Identity.Node).
	RoleNode
	// RoleAdmin: membership, snapshots, rebalancing, draining,
	// abandoning, replication configuration, tokens, profiles.
	RoleAdmin
)

var roleNames = [...]string{RoleNone: "none", RoleRead: "read", RoleProxy: "proxy", RoleNode: "node", RoleAdmin: "admin"}

func (r Role) String() string {
	if r >= 0 && int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// Includes reports whether a caller holding r may call a method that needs
// need. Node methods need exactly a node credential: admin does not
// include them, so no operator or proxy credential can speak for a node.
func (r Role) Includes(need Role) bool {
	switch need {
	case RoleNone:
		return true
	case RoleRead:
		return r == RoleRead || r == RoleProxy || r == RoleNode || r == RoleAdmin
	case RoleProxy:
		return r == RoleProxy || r == RoleNode || r == RoleAdmin
	case RoleNode:
		return r == RoleNode
	case RoleAdmin:
		return r == RoleAdmin
	}
	return false
}

// ParseRole parses "read", "proxy", "node" or "admin" (the roles a
// credential can hold; "none" is not one).
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return RoleRead, nil
	case "proxy":
		return RoleProxy, nil
	case "node":
		return RoleNode, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q: want read, proxy, node or admin", s)
}

// FromTokenRecord is the role and bound node a token record grants. A node
// token without a node ID predates per-node identity: it keeps working with
// the proxy's rights (what such tokens were handed out for), and can never
// speak for a node.
func FromTokenRecord(t *logpb.TokenRecord) (Role, uint64) {
	switch t.GetRole() {
	case logpb.TokenRole_TOKEN_ROLE_READ:
		return RoleRead, 0
	case logpb.TokenRole_TOKEN_ROLE_PROXY:
		return RoleProxy, 0
	case logpb.TokenRole_TOKEN_ROLE_NODE:
		if t.GetNodeId() == 0 {
			return RoleProxy, 0
		}
		return RoleNode, t.GetNodeId()
	case logpb.TokenRole_TOKEN_ROLE_ADMIN:
		return RoleAdmin, 0
	}
	return RoleNone, 0
}

// TokenRole maps a role to the token record's enum.
func (r Role) TokenRole() logpb.TokenRole {
	switch r {
	case RoleRead:
		return logpb.TokenRole_TOKEN_ROLE_READ
	case RoleProxy:
		return logpb.TokenRole_TOKEN_ROLE_PROXY
	case RoleNode:
		return logpb.TokenRole_TOKEN_ROLE_NODE
	case RoleAdmin:
		return logpb.TokenRole_TOKEN_ROLE_ADMIN
	}
	return logpb.TokenRole_TOKEN_ROLE_UNKNOWN
}
