package channels

import (
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// The checked requests. Each holds the command its use case proposes,
// built (and so validated) by commands.New; a constructor's error matches
// commands.ErrInvalid. The zero value of a request is not valid.

// AddPChannels creates the named PChannels that do not exist yet.
type AddPChannels struct{ cmd commands.Command }

// NewAddPChannels checks an AddPChannels request.
func NewAddPChannels(req *coordpb.AddPChannelsRequest) (AddPChannels, error) {
	c, err := commands.New(&logpb.AddPChannels{Pchannels: req.Names}, "")
	return AddPChannels{c}, err
}

// Drain marks a streaming node DRAINING, or returns it to UP.
type Drain struct {
	cmd    commands.Command
	nodeID uint64
}

// NewDrain checks a DrainNode (draining) or UndrainNode request; an empty
// reason becomes "operator request".
func NewDrain(req *coordpb.DrainNodeRequest, draining bool) (Drain, error) {
	reason := req.Reason
	if reason == "" {
		reason = "operator request"
	}
	c, err := commands.New(&logpb.SetStreamingNodeDrain{NodeId: req.NodeId, Draining: draining, Reason: reason}, "")
	return Drain{c, req.NodeId}, err
}

// AllocVChannels places a collection's shards on PChannels.
type AllocVChannels struct{ cmd commands.Command }

// NewAllocVChannels checks an AllocVirtualChannels request (its request
// ID deduplicates the command).
func NewAllocVChannels(req *coordpb.AllocVirtualChannelsRequest) (AllocVChannels, error) {
	c, err := commands.New(&logpb.AllocVirtualChannels{CollectionId: req.CollectionId, Count: req.Count}, req.RequestId)
	return AllocVChannels{c}, err
}

// DropVChannels forgets a collection's VChannels.
type DropVChannels struct{ cmd commands.Command }

// NewDropVChannels checks a DropVirtualChannels request (its request ID
// deduplicates the command).
func NewDropVChannels(req *coordpb.DropVirtualChannelsRequest) (DropVChannels, error) {
	c, err := commands.New(&logpb.DropVirtualChannels{CollectionId: req.CollectionId}, req.RequestId)
	return DropVChannels{c}, err
}

// AssignmentError is a streaming node's report that a PChannel's WAL broke
// at a term.
type AssignmentError struct{ cmd commands.Command }

// NewAssignmentError checks a ReportAssignmentError request; the error
// text is truncated to a reason's limit.
func NewAssignmentError(req *coordpb.ReportAssignmentErrorRequest) (AssignmentError, error) {
	c, err := commands.New(&logpb.MarkPChannelsUnavailable{Channels: []*logpb.PChannelTerm{{Pchannel: req.Pchannel, Term: req.Term,
		Reason: vocab.TruncateReason(req.Error)}}}, "")
	return AssignmentError{c}, err
}

// ResetRole makes a secondary cluster a primary again.
type ResetRole struct {
	cmd    commands.Command
	reason string
}

// NewResetRole checks a ResetReplicateRole request (the reason is
// required).
func NewResetRole(req *coordpb.ResetReplicateRoleRequest) (ResetRole, error) {
	c, err := commands.New(&logpb.ResetReplicateRole{Reason: req.Reason}, "")
	return ResetRole{c, req.Reason}, err
}
