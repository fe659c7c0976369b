package broadcaster

import (
	"context"
	"strings"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// The checked requests (docs/architecture.md#command-flow). A constructor
// checks a request once, on the member that serves the call; the manager
// takes only what a constructor made and checks no shape again; Apply
// does, as the guard. A constructor's error matches commands.ErrInvalid.
// The zero value of a checked request is not valid.

// Checked is a broadcast request whose shape Check accepted.
type Checked struct {
	req   Request                   // as the caller gave it
	shape commands.BroadcastRequest // what Check checked, type keys included
	ok    bool
}

// Request returns a copy of the request c was made from (for fakes and
// logs; its resource keys are shared, not copied).
func (c Checked) Request() Request { return c.req }

// NewRequest reads and checks a Broadcast API request: resource-key
// domains by their API names (vocab.ResourceDomain, any letter case), an
// idempotency key in its scope (CLUSTER, DATABASE or COLLECTION), then
// Check.
func NewRequest(req *coordpb.BroadcastRequest) (Checked, error) {
	out := Request{MessageType: req.MessageType, Payload: req.Payload, VChannels: req.Vchannels, AckSyncUp: req.AckSyncUp,
		RequestID: req.RequestId}
	for _, k := range req.ResourceKeys {
		d, ok := logDomain(k.Domain)
		if !ok {
			return Checked{}, vocab.Errorf(commands.ErrInvalid, "unknown resource key domain %q", k.Domain)
		}
		out.ResourceKeys = append(out.ResourceKeys, &logpb.ResourceKey{Domain: d, Key: k.Key, Shared: k.Shared})
	}
	if ik := req.IdempotencyKey; ik != nil {
		key, err := scopedKey(ik)
		if err != nil {
			return Checked{}, err
		}
		out.IdempotencyKey = key
	}
	return Check(out)
}

// logDomain is the log's number of an API domain name (any letter case).
func logDomain(name string) (logpb.ResourceDomain, bool) {
	d, err := vocab.ParseResourceDomain(name)
	if err != nil {
		return logpb.ResourceDomain_RK_UNKNOWN, false
	}
	return commands.LogResourceDomain(d)
}

// scopedKey is an API idempotency key in its scope's form
// (vocab.ClusterScopedKey and friends).
func scopedKey(ik *coordpb.IdempotencyKey) (string, error) {
	switch strings.ToUpper(ik.Scope) {
	case "CLUSTER":
		if ik.ScopeId != 0 {
			return "", vocab.Errorf(commands.ErrInvalid, "a CLUSTER idempotency scope takes no scope_id, got %d", ik.ScopeId)
		}
		return vocab.ClusterScopedKey(ik.Key)
	case "DATABASE":
		return vocab.DatabaseScopedKey(ik.ScopeId, ik.Key)
	case "COLLECTION":
		return vocab.CollectionScopedKey(ik.ScopeId, ik.Key)
	}
	return "", vocab.Errorf(commands.ErrInvalid, "idempotency scope must be CLUSTER, DATABASE or COLLECTION, got %q", ik.Scope)
}

// Ack is a streaming node's ack of an ack_sync_up task, its command built
// (and so checked) by NewAck.
type Ack struct {
	cmd    commands.Command
	id     uint64
	caller uint64 // the node credential the ack was sent with (SpokenFor), 0: none
}

// SpokenFor returns the ack bound to the node identity of the credential
// it came with (the API checked that this identity may speak for the
// session the ack names): its command is proposed stamped with it
// (commands.CallerNode) and Apply checks the binding again. 0 (no
// authentication) stamps nothing.
func (a Ack) SpokenFor(caller uint64) Ack {
	a.caller = caller
	return a
}

// NewAck checks an Ack request: it names the streaming node session that
// sent it (node_id and epoch), and its checkpoints are checked as Apply
// will check them.
func NewAck(req *coordpb.AckRequest) (Ack, error) {
	if req.NodeId == 0 || req.Epoch == 0 {
		return Ack{}, vocab.Errorf(commands.ErrInvalid, "node_id and epoch are required: an ack comes from the streaming node that owns the channel")
	}
	var cps []*logpb.VChannelCheckpoint
	for _, cp := range req.Checkpoints {
		cps = append(cps, &logpb.VChannelCheckpoint{Vchannel: cp.Vchannel, Term: cp.Term, Offset: cp.Offset, TimeTick: cp.TimeTick})
	}
	c, err := commands.New(&logpb.AckBroadcast{BroadcastId: req.BroadcastId, Checkpoints: cps, FromNode: req.NodeId, FromEpoch: req.Epoch}, "")
	if err != nil {
		return Ack{}, err
	}
	return Ack{cmd: c, id: req.BroadcastId}, nil
}

// CommitAck commits ack with p, for a member without a broadcaster (Apply
// accepts it only from the channel's owner either way; Manager.Ack also
// wakes the task).
func CommitAck(ctx context.Context, p commands.Proposer, ack Ack) error {
	if !ack.cmd.Checked() {
		return vocab.Errorf(commands.ErrInvalid, "an ack not made by broadcaster.NewAck")
	}
	_, err := commands.Commit(ctx, p, ack.cmd, commands.CallerNode(ack.caller))
	return err
}

// CheckAbandon checks an AbandonBroadcast request as Apply will check its
// command (a positive ID, a reason within its limit).
func CheckAbandon(req *coordpb.AbandonBroadcastRequest) error {
	_, err := commands.New(&logpb.AbandonBroadcast{BroadcastId: req.BroadcastId, Reason: req.Reason}, "")
	return err
}

// Body is the ack's log command body (for fakes and logs; not to be
// changed).
func (a Ack) Body() *logpb.AckBroadcast { return a.cmd.Body.(*logpb.AckBroadcast) }

// Ack records checkpoints of an ack_sync_up task from the streaming node
// that persisted the message (the ack's node session); the FSM refuses it
// unless that node owns each channel at the checkpoint's term. Idempotent:
// unknown or finished tasks and already-acked VChannels are no-ops. The
// ack's command was built by NewAck and is proposed as built.
func (m *Manager) Ack(ctx context.Context, ack Ack) error {
	if m.leader.EstablishedTerm() == 0 {
		return errNotLeader
	}
	if err := CommitAck(ctx, m.leader, ack); err != nil {
		return err
	}
	if ts := m.current(); ts != nil {
		ts.nudge(ack.id)
	}
	return nil
}
