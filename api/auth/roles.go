package auth

import (
	"fmt"

	"github.com/coordd/coordd/commands/logpb"
)

// Role is what a caller may do; each role includes the ones below it.
type Role int

const (
	// RoleNone: no credentials needed (health and readiness probes).
	RoleNone Role = iota
	// RoleRead: status, lists, gets and watches.
	RoleRead
	// RoleNode: what streaming nodes and proxies call (registration,
	// heartbeats, acks, allocation, data-path reports, DDL broadcasts).
	RoleNode
	// RoleAdmin: membership, snapshots, rebalancing, draining,
	// abandoning, replication configuration, tokens, profiles.
	RoleAdmin
)

var roleNames = [...]string{RoleNone: "none", RoleRead: "read", RoleNode: "node", RoleAdmin: "admin"}

func (r Role) String() string {
	if r >= 0 && int(r) < len(roleNames) {
		return roleNames[r]
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole parses "read", "node" or "admin" (the roles a credential can
// hold; "none" is not one).
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return RoleRead, nil
	case "node":
		return RoleNode, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q: want read, node or admin", s)
}

// FromTokenRole maps a token record's role.
func FromTokenRole(r logpb.TokenRole) Role {
	switch r {
	case logpb.TokenRole_TOKEN_ROLE_READ:
		return RoleRead
	case logpb.TokenRole_TOKEN_ROLE_NODE:
		return RoleNode
	case logpb.TokenRole_TOKEN_ROLE_ADMIN:
		return RoleAdmin
	}
	return RoleNone
}

// TokenRole maps a role to the token record's enum.
func (r Role) TokenRole() logpb.TokenRole {
	switch r {
	case RoleRead:
		return logpb.TokenRole_TOKEN_ROLE_READ
	case RoleNode:
		return logpb.TokenRole_TOKEN_ROLE_NODE
	case RoleAdmin:
		return logpb.TokenRole_TOKEN_ROLE_ADMIN
	}
	return logpb.TokenRole_TOKEN_ROLE_UNKNOWN
}
