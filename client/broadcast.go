package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// MaxListBroadcasts bounds the limit of ListBroadcasts.
const MaxListBroadcasts = 10000

// Resource-key domains, as the API spells them (vocab.ResourceDomains).
const (
	DomainCluster        = string(vocab.DomainCluster)
	DomainDBName         = string(vocab.DomainDBName)
	DomainCollectionName = string(vocab.DomainCollectionName)
	DomainPrivilege      = string(vocab.DomainPrivilege)
	DomainSnapshotName   = string(vocab.DomainSnapshotName)
	DomainImportJobID    = string(vocab.DomainImportJobID)
)

// Idempotency-key scopes.
const (
	ScopeCluster    = "CLUSTER"
	ScopeDatabase   = "DATABASE"
	ScopeCollection = "COLLECTION"
)

// ResourceDomains lists the resource-key domains the API accepts.
func ResourceDomains() []string {
	var out []string
	for _, d := range vocab.ResourceDomains() {
		out = append(out, string(d))
	}
	return out
}

// IdempotencyKey makes a broadcast retry-safe: a second broadcast with the
// same message type and the same scoped key returns the first task
// (duplicated=true) for as long as coordd keeps its tombstone.
type IdempotencyKey struct {
	// Scope is CLUSTER, DATABASE or COLLECTION.
	Scope string
	// ScopeID is the database or collection ID (0 for CLUSTER).
	ScopeID int64
	// Key is 1..256 bytes of printable ASCII chosen by the caller.
	Key string
}

// Scoped returns the scoped key coordd stores (vocab.ClusterScopedKey and
// friends), or why k is invalid.
func (k IdempotencyKey) Scoped() (string, error) {
	switch strings.ToUpper(k.Scope) {
	case ScopeCluster:
		if k.ScopeID != 0 {
			return "", fmt.Errorf("a CLUSTER idempotency key takes scope id 0, got %d", k.ScopeID)
		}
		return vocab.ClusterScopedKey(k.Key)
	case ScopeDatabase:
		return vocab.DatabaseScopedKey(k.ScopeID, k.Key)
	case ScopeCollection:
		return vocab.CollectionScopedKey(k.ScopeID, k.Key)
	}
	return "", fmt.Errorf("idempotency scope must be CLUSTER, DATABASE or COLLECTION, got %q", k.Scope)
}

// BroadcastSpec is one broadcast.
type BroadcastSpec struct {
	// MessageType is 1..64 bytes of [A-Za-z0-9_]. coordd runs callbacks for
	// CreateCollection, DropCollection, AlterReplicateConfig and FlushAll;
	// other types are broadcast, acked and recorded only.
	MessageType string
	Payload     []byte
	// ResourceKeys are locked for the broadcast (coordd adds the shared
	// CLUSTER key unless a CLUSTER key is given).
	ResourceKeys []*coordpb.ResourceKey
	// VChannels are the targets (the CChannel is added when absent). Empty:
	// a CreateCollection targets the collection's VChannels (allocated
	// first); anything else targets every PChannel.
	VChannels []string
	// AckSyncUp: streaming nodes ack the message themselves (Ack).
	AckSyncUp bool
	// Idempotency, when set, makes retries return the same task.
	Idempotency *IdempotencyKey
	// RequestID names the call: every attempt of it carries the ID, and
	// coordd creates no second task for a repeat of it (within its
	// request-ID window, docs/semantics.md#request-id-dedup). Empty: the
	// client makes one per Broadcast call.
	RequestID string
}

// Validate checks the spec with the shape rules the server applies to
// every broadcast (vocab.ValidateBroadcast; a built-in message type's
// payload is checked by the server only).
func (s BroadcastSpec) Validate() error {
	_, err := s.request()
	return err
}

// request checks the spec with the rules the server applies and converts
// it.
func (s BroadcastSpec) request() (*coordpb.BroadcastRequest, error) {
	req := &coordpb.BroadcastRequest{MessageType: s.MessageType, Payload: s.Payload, ResourceKeys: s.ResourceKeys,
		Vchannels: s.VChannels, AckSyncUp: s.AckSyncUp, RequestId: s.RequestID}
	if err := vocab.ValidateRequestID(s.RequestID); err != nil {
		return nil, err
	}
	shape := vocab.Broadcast{MessageType: s.MessageType, Payload: s.Payload, VChannels: s.VChannels}
	for _, k := range s.ResourceKeys {
		d, err := vocab.ParseResourceDomain(k.GetDomain())
		if err != nil {
			return nil, err
		}
		shape.ResourceKeys = append(shape.ResourceKeys, vocab.ResourceKey{Domain: d, Key: k.GetKey(), Shared: k.GetShared()})
	}
	if ik := s.Idempotency; ik != nil {
		key, err := ik.Scoped()
		if err != nil {
			return nil, err
		}
		shape.IdempotencyKey = key
		req.IdempotencyKey = &coordpb.IdempotencyKey{Scope: strings.ToUpper(ik.Scope), ScopeId: ik.ScopeID, Key: ik.Key}
	}
	if err := vocab.ValidateBroadcast(shape); err != nil {
		return nil, err
	}
	return req, nil
}

// Broadcast appends a message to every target atomically and in order,
// waits until every target acked and the ack callback ran, and returns the
// per-VChannel append results. A deadline ends only the wait: the task
// goes on (see GetBroadcast).
//
// Every attempt of the call carries one request ID (spec.RequestID, or one
// the client makes), so a resend after an attempt whose outcome is unknown
// creates no second task: coordd answers it with the first task
// (duplicated set). The call is therefore retried like a read
// (docs/semantics.md#client-retries). An idempotency key also makes
// separate calls return the same task.
func (c *Client) Broadcast(ctx context.Context, spec BroadcastSpec) (*coordpb.BroadcastResponse, error) {
	req, err := spec.request()
	if err != nil {
		return nil, localError("Broadcast", err)
	}
	if req.RequestId == "" {
		req.RequestId = newRequestID() // once per call, reused by its retries
	}
	kind := longRetrySafe
	var resp *coordpb.BroadcastResponse
	_, err = c.do(ctx, "Broadcast("+spec.MessageType+")", kind, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewBroadcasterClient(cc).Broadcast(ctx, req, o...)
		return err
	})
	return resp, err
}

// Ack records that the streaming node with session (nodeID, epoch)
// persisted broadcast id's message on the given VChannels (ack_sync_up
// tasks). coordd accepts it only for channels that node owns, at their
// current term. It is idempotent: the first checkpoint per VChannel wins.
func (c *Client) Ack(ctx context.Context, id, nodeID, epoch uint64, checkpoints []*coordpb.Checkpoint) error {
	op := fmt.Sprintf("Ack(%d)", id)
	if nodeID == 0 || epoch == 0 {
		return localError(op, errors.New("node_id and epoch are required: an ack comes from the streaming node that owns the channel"))
	}
	cps := make([]vocab.Checkpoint, len(checkpoints))
	for i, cp := range checkpoints {
		cps[i] = vocab.Checkpoint{VChannel: cp.GetVchannel(), Term: cp.GetTerm(), TimeTick: cp.GetTimeTick()}
	}
	if err := vocab.ValidateAck(id, nodeID, epoch, cps); err != nil {
		return localError(op, err)
	}
	req := &coordpb.AckRequest{BroadcastId: id, Checkpoints: checkpoints, NodeId: nodeID, Epoch: epoch}
	_, err := c.do(ctx, op, retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) error {
		_, err := coordpb.NewBroadcasterClient(cc).Ack(ctx, req, o...)
		return err
	})
	return err
}

// GetBroadcast returns one broadcast task (pending or tombstoned), read
// through the leader.
func (c *Client) GetBroadcast(ctx context.Context, id uint64) (*coordpb.BroadcastInfo, error) {
	op := fmt.Sprintf("GetBroadcast(%d)", id)
	if id == 0 {
		return nil, localError(op, errors.New("broadcast id must be positive"))
	}
	req := &coordpb.GetBroadcastRequest{BroadcastId: id, Consistency: coordpb.ReadConsistency_LINEARIZABLE}
	var resp *coordpb.BroadcastInfo
	_, err := c.do(ctx, op, retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewBroadcasterClient(cc).GetBroadcast(ctx, req, o...)
		return err
	})
	return resp, err
}

// ListBroadcasts returns the newest broadcast tasks by ID, read through the
// leader: at most limit (0: the server's default of 1000; at most
// MaxListBroadcasts), pending ones only with pendingOnly.
func (c *Client) ListBroadcasts(ctx context.Context, pendingOnly bool, limit uint32) ([]*coordpb.BroadcastInfo, error) {
	if limit > MaxListBroadcasts {
		return nil, localError("ListBroadcasts", fmt.Errorf("limit must be at most %d, got %d", MaxListBroadcasts, limit))
	}
	req := &coordpb.ListBroadcastsRequest{Consistency: coordpb.ReadConsistency_LINEARIZABLE, PendingOnly: pendingOnly, Limit: limit}
	var resp *coordpb.ListBroadcastsResponse
	_, err := c.do(ctx, "ListBroadcasts", retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) (err error) {
		resp, err = coordpb.NewBroadcasterClient(cc).ListBroadcasts(ctx, req, o...)
		return err
	})
	return resp.GetBroadcasts(), err
}

// RetryBroadcast retries a pending task's appends and callback now. A
// repeat is harmless, so it is retried like a read.
func (c *Client) RetryBroadcast(ctx context.Context, id uint64) error {
	op := fmt.Sprintf("RetryBroadcast(%d)", id)
	if id == 0 {
		return localError(op, errors.New("broadcast id must be positive"))
	}
	req := &coordpb.RetryBroadcastRequest{BroadcastId: id}
	_, err := c.do(ctx, op, retrySafe, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) error {
		_, err := coordpb.NewBroadcasterClient(cc).RetryBroadcast(ctx, req, o...)
		return err
	})
	return err
}

// AbandonBroadcast gives up on a pending task: it is tombstoned without its
// callback, its resource keys are released and reason is kept. A repeat
// of an abandon that went through answers FailedPrecondition (already
// finished), so after an unknown outcome it is retried at most
// Config.OutcomeUnknownRetries times.
func (c *Client) AbandonBroadcast(ctx context.Context, id uint64, reason string) error {
	op := fmt.Sprintf("AbandonBroadcast(%d)", id)
	if err := vocab.ValidateAbandon(id, reason); err != nil {
		return localError(op, err)
	}
	req := &coordpb.AbandonBroadcastRequest{BroadcastId: id, Reason: reason}
	_, err := c.do(ctx, op, mutation, func(ctx context.Context, cc *grpc.ClientConn, o ...grpc.CallOption) error {
		_, err := coordpb.NewBroadcasterClient(cc).AbandonBroadcast(ctx, req, o...)
		return err
	})
	return err
}

// CreateCollectionPayload is the payload of a CreateCollection broadcast.
func CreateCollectionPayload(collectionID int64, shards uint32) []byte {
	return marshalPayload(&coordpb.CreateCollectionPayload{CollectionId: collectionID, Shards: shards})
}

// DropCollectionPayload is the payload of a DropCollection broadcast.
func DropCollectionPayload(collectionID int64) []byte {
	return marshalPayload(&coordpb.DropCollectionPayload{CollectionId: collectionID})
}

func marshalPayload(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err) // scalar fields only: cannot fail
	}
	return b
}
