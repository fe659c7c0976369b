package broadcaster

import (
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Check validates what can be checked without state: the message type
// (one of vocab.KnownMessageTypes), payload size, resource keys,
// idempotency key, request ID and any explicit targets. It is the one
// shape check a broadcast gets on the member that serves it (the API's
// NewRequest calls it before forwarding; a forwarded call is checked again
// by the leader's handler): Manager.Broadcast takes only its result and
// checks no shape again; Apply does, as the guard.
//
// What it checks is kept (commands.BroadcastRequest, with the keys the
// message type always holds, withTypeKeys): the leader completes it into
// the command with only the targets, predecessors and request ID it adds
// checked (prepare).
func Check(req Request) (Checked, error) {
	if err := vocab.ValidateKnownMessageType(req.MessageType); err != nil {
		return Checked{}, vocab.Errorf(commands.ErrInvalid, "%w", err)
	}
	t := withTypeKeys(req)
	shape, err := commands.CheckBroadcastRequest(&logpb.CreateBroadcast{MessageType: t.MessageType, Payload: t.Payload,
		ResourceKeys: t.ResourceKeys, Vchannels: t.VChannels, AckSyncUp: t.AckSyncUp, IdempotencyKey: t.IdempotencyKey}, t.RequestID)
	if err != nil {
		return Checked{}, err
	}
	return Checked{req: req, shape: shape, ok: true}, nil
}

// withTypeKeys adds the resource keys a message type always holds: an
// AlterReplicateConfig holds the exclusive Cluster key, so no other
// broadcast runs between its creation (where the configuration is checked
// against the installed one) and its callback.
func withTypeKeys(req Request) Request {
	if req.MessageType == vocab.MsgAlterReplicateConfig {
		req.ResourceKeys = append(append([]*logpb.ResourceKey(nil), req.ResourceKeys...),
			&logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_CLUSTER})
	}
	return req
}

// prepare builds the CreateBroadcast command for c on st, ordered behind
// the tasks after (none: not ordered): the targets are chosen when c
// names none and the CChannel is added; then the state is checked as the
// state machine will check it (the one state check before Apply). The
// command is built here once, from c's checked request with only what the
// leader adds checked (commands.BroadcastRequest.Command), and proposed as
// built. requestID is the command's (never empty: Broadcast makes one for
// a request without).
func prepare(st *fsm.State, c Checked, after []uint64, requestID string) (commands.Command, error) {
	req := withTypeKeys(c.req)
	if !st.IsPrimary() {
		return commands.Command{}, ErrNotPrimary
	}
	cch := st.CChannel()
	if cch == "" {
		return commands.Command{}, &commands.RejectedError{Code: logpb.RejectCode_REJECT_CONFLICT,
			Message: "streaming is not initialized: there is no control channel yet"}
	}
	targets, err := chooseTargets(st, req)
	if err != nil {
		return commands.Command{}, err
	}
	if !contains(targets, cch) {
		targets = append(targets, cch)
	}
	cmd, err := c.shape.Command(targets, after, requestID)
	if err != nil {
		return commands.Command{}, err
	}
	body := cmd.Body.(*logpb.CreateBroadcast)
	if r := st.CheckBroadcastCreation(body); r != nil {
		return commands.Command{}, commands.Rejected(r)
	}
	if err := checkPendingCreate(st, body); err != nil {
		return commands.Command{}, err
	}
	return cmd, nil
}

// chooseTargets returns req's targets, or when it names none, the default
// ones for its type: a CreateCollection goes to the collection's
// VChannels (those of its pending CreateCollection if it has one, else
// planned now; recorded by its callback), a DropCollection to
// the collection's VChannels, an AlterReplicateConfig to every PChannel and
// anything else (a cluster-level message) to every PChannel available in
// replication. The CChannel stands in for its own PChannel.
func chooseTargets(st *fsm.State, req Request) ([]string, error) {
	if len(req.VChannels) > 0 {
		return append([]string(nil), req.VChannels...), nil
	}
	switch req.MessageType {
	case vocab.MsgCreateCollection:
		var p logpb.CreateCollectionPayload
		if err := proto.Unmarshal(req.Payload, &p); err != nil {
			return nil, vocab.Errorf(commands.ErrInvalid, "CreateCollection payload: %v", err)
		}
		if follow, ok, err := followPendingCreate(st, p.CollectionId, p.Shards); ok {
			return follow, err
		}
		plan, r := st.PlanCollectionVChannels(p.CollectionId, p.Shards)
		if r != nil {
			return nil, commands.Rejected(r)
		}
		return plan, nil
	case vocab.MsgDropCollection:
		var p logpb.DropCollectionPayload
		if err := proto.Unmarshal(req.Payload, &p); err != nil {
			return nil, vocab.Errorf(commands.ErrInvalid, "DropCollection payload: %v", err)
		}
		if coll, ok := st.Collection(p.CollectionId); ok {
			return append([]string(nil), coll.Vchannels...), nil
		}
		return nil, nil // the CChannel alone; the callback has nothing to drop
	case vocab.MsgAlterReplicateConfig:
		return st.ClusterTargets(true), nil
	}
	return st.ClusterTargets(false), nil
}
