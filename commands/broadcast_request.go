package commands

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// BroadcastRequest is a CreateBroadcast whose request part (message type,
// payload, resource keys, idempotency key, explicit targets, request ID)
// was checked once, by CheckBroadcastRequest, on the member that serves the
// call. The leader completes it into the command it proposes with Command,
// which checks only what the leader adds; Apply checks the whole command
// again (Validate), as the guard. The zero value is not valid.
type BroadcastRequest struct {
	body      *logpb.CreateBroadcast // never changed once checked
	requestID string
}

// CheckBroadcastRequest checks b and requestID as a CreateBroadcast
// command is checked, except that b may have no targets yet
// (ValidateBroadcastRequest). It keeps a copy of b.
func CheckBroadcastRequest(b *logpb.CreateBroadcast, requestID string) (BroadcastRequest, error) {
	if err := vocab.ValidateRequestID(requestID); err != nil {
		return BroadcastRequest{}, invalidWrap(err)
	}
	if err := ValidateBroadcastRequest(b); err != nil {
		return BroadcastRequest{}, err
	}
	return BroadcastRequest{body: proto.Clone(b).(*logpb.CreateBroadcast), requestID: requestID}, nil
}

// Command is r's CreateBroadcast command with the leader's decisions: its
// targets (the request's own or chosen by the leader, the control channel
// included), the tasks it is ordered behind (after, none: not ordered) and
// its request ID (r's, or one the leader made when r has none). Only these
// and the command's size are checked here; the rest was checked by
// CheckBroadcastRequest. Errors wrap ErrInvalid or ErrTooLarge.
func (r BroadcastRequest) Command(targets []string, after []uint64, requestID string) (Command, error) {
	if r.body == nil {
		return Command{}, fmt.Errorf("%w: a broadcast request not made by CheckBroadcastRequest", ErrInvalid)
	}
	if err := vocab.ValidateBroadcastTargets(targets); err != nil {
		return Command{}, invalidWrap(err)
	}
	if err := validatePredecessors(after); err != nil {
		return Command{}, err
	}
	if requestID != r.requestID {
		if err := vocab.ValidateRequestID(requestID); err != nil {
			return Command{}, invalidWrap(err)
		}
	}
	body := proto.Clone(r.body).(*logpb.CreateBroadcast)
	body.Vchannels, body.AfterBroadcasts = targets, after
	c, err := wrap(body)
	if err != nil {
		return Command{}, err
	}
	if n := proto.Size(body); n > MaxCommandBytes {
		return Command{}, fmt.Errorf("%w: %s body is %d bytes (max %d)", ErrTooLarge, c.Type, n, MaxCommandBytes)
	}
	c.RequestID = requestID
	c.checked = true
	return c, nil
}
