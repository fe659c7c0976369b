package commands

import (
	"fmt"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// ErrInvalid marks a command whose shape is wrong regardless of state. It
// is vocab.ErrInvalidCommand, so the API names it without the log.
var ErrInvalid = vocab.ErrInvalidCommand

// MaxReserveIDs bounds one ID window reservation.
const MaxReserveIDs = 1 << 24

// Validate checks a command's shape without looking at any state. The FSM
// calls it before every apply, so a command that fails here is rejected
// identically on every replica.
func Validate(c Command) error {
	switch b := c.Body.(type) {
	case *logpb.LeaderEstablished:
		if b.Term == 0 {
			return invalid("leader term must be positive")
		}
		return invalidWrap(vocab.ValidateMemberID(b.LeaderId))
	case *logpb.UpsertMember:
		return ValidateMember(b.Member)
	case *logpb.RemoveMember:
		return invalidWrap(vocab.ValidateMemberID(b.Id))
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
	if err := vocab.ValidateMemberID(m.Id); err != nil {
		return invalidWrap(err)
	}
	if err := vocab.ValidateAddr("raft_addr", m.RaftAddr, true); err != nil {
		return invalidWrap(err)
	}
	if err := vocab.ValidateAddr("grpc_addr", m.GrpcAddr, false); err != nil {
		return invalidWrap(err)
	}
	return invalidWrap(vocab.ValidateAddr("http_addr", m.HttpAddr, false))
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// invalidWrap marks a refusal of the shared vocabulary as an invalid
// command ("invalid command: <rule>"); nil stays nil.
func invalidWrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}
