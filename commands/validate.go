package commands

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/coordd/coordd/commands/logpb"
)

// ErrInvalid marks a command whose shape is wrong regardless of state.
var ErrInvalid = errors.New("invalid command")

// Shape limits shared by the API (fail fast) and the FSM (the real guard).
const (
	MaxMemberIDBytes = 64
	// MaxAllocCount bounds one allocator request.
	MaxAllocCount = 1 << 16
	// MaxReserveIDs bounds one ID window reservation.
	MaxReserveIDs = 1 << 24
)

// Validate checks a command's shape without looking at any state. The FSM
// calls it before every apply, so a command that fails here is rejected
// identically on every replica.
func Validate(c Command) error {
	switch b := c.Body.(type) {
	case *logpb.LeaderEstablished:
		if b.Term == 0 {
			return invalid("leader term must be positive")
		}
		return ValidateMemberID(b.LeaderId)
	case *logpb.UpsertMember:
		return ValidateMember(b.Member)
	case *logpb.RemoveMember:
		return ValidateMemberID(b.Id)
	case *logpb.ExtendTSOWindow:
		if b.LimitPhysicalMs <= 0 {
			return invalid("tso window limit must be positive, got %d", b.LimitPhysicalMs)
		}
		if b.LimitPhysicalMs >= 1<<46 {
			return invalid("tso window limit %d overflows the 46-bit physical part", b.LimitPhysicalMs)
		}
		return nil
	case *logpb.ReserveIDs:
		if b.Count == 0 || b.Count > MaxReserveIDs {
			return invalid("id reservation count must be in 1..%d, got %d", MaxReserveIDs, b.Count)
		}
		return nil
	case *logpb.RaiseAllocatorFloors:
		if b.NextId == 0 && b.TsoLimitPhysicalMs == 0 {
			return invalid("RaiseAllocatorFloors needs a next id or a tso limit")
		}
		if b.TsoLimitPhysicalMs < 0 || b.TsoLimitPhysicalMs >= 1<<46 {
			return invalid("tso limit %d is outside the 46-bit physical part", b.TsoLimitPhysicalMs)
		}
		return nil
	case nil:
		return nil // an ignorable command this binary does not know
	}
	if err, ok := validateChannelCommand(c.Body); ok {
		return err
	}
	if err, ok := validateBroadcastCommand(c.Body); ok {
		return err
	}
	if err, ok := validateSegmentCommand(c.Body); ok {
		return err
	}
	if err, ok := validateManifestCommand(c.Body); ok {
		return err
	}
	if err, ok := validateTokenCommand(c.Body); ok {
		return err
	}
	return invalid("no validator for %s", c.Type)
}

// ValidateMember checks a member record: an ID and three loopback-or-host
// addresses (grpc and http may be empty for a member not yet registered).
func ValidateMember(m *logpb.Member) error {
	if m == nil {
		return invalid("member is missing")
	}
	if err := ValidateMemberID(m.Id); err != nil {
		return err
	}
	if err := ValidateAddr("raft_addr", m.RaftAddr, true); err != nil {
		return err
	}
	if err := ValidateAddr("grpc_addr", m.GrpcAddr, false); err != nil {
		return err
	}
	return ValidateAddr("http_addr", m.HttpAddr, false)
}

// ValidateMemberID accepts 1..64 bytes of [A-Za-z0-9._-].
func ValidateMemberID(id string) error {
	if id == "" || len(id) > MaxMemberIDBytes {
		return invalid("member id must be 1..%d bytes, got %d", MaxMemberIDBytes, len(id))
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-'
		if !ok {
			return invalid("member id %q: character %q not allowed (use letters, digits, '.', '_', '-')", id, ch)
		}
	}
	return nil
}

// ValidateAddr checks a host:port address with a numeric port in 1..65535.
func ValidateAddr(field, addr string, required bool) error {
	if addr == "" {
		if required {
			return invalid("%s is required", field)
		}
		return nil
	}
	if len(addr) > 255 {
		return invalid("%s is %d bytes (max 255)", field, len(addr))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return invalid("%s %q: %v", field, addr, err)
	}
	if host == "" {
		return invalid("%s %q: host is empty", field, addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return invalid("%s %q: port must be 1..65535", field, addr)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
