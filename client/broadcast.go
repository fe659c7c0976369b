package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// MaxListBroadcasts bounds the limit of ListBroadcasts.
const MaxListBroadcasts = 10000

// Resource-key domains, as the API spells them.
const (
	DomainCluster        = "CLUSTER"
	DomainDBName         = "DB_NAME"
	DomainCollectionName = "COLLECTION_NAME"
	DomainPrivilege      = "PRIVILEGE"
	DomainSnapshotName   = "SNAPSHOT_NAME"
	DomainImportJobID    = "IMPORT_JOB_ID"
)

// Idempotency-key scopes.
const (
	ScopeCluster    = "CLUSTER"
	ScopeDatabase   = "DATABASE"
	ScopeCollection = "COLLECTION"
)

var domains = map[string]logpb.ResourceDomain{
	DomainCluster: logpb.ResourceDomain_RK_CLUSTER, DomainDBName: logpb.ResourceDomain_RK_DB_NAME,
	DomainCollectionName: logpb.ResourceDomain_RK_COLLECTION_NAME, DomainPrivilege: logpb.ResourceDomain_RK_PRIVILEGE,
	DomainSnapshotName: logpb.ResourceDomain_RK_SNAPSHOT_NAME, DomainImportJobID: logpb.ResourceDomain_RK_IMPORT_JOB_ID,
}

// ResourceDomains lists the resource-key domains the API accepts.
func ResourceDomains() []string {
	return []string{DomainCluster, DomainDBName, DomainCollectionName, DomainPrivilege, DomainSnapshotName, DomainImportJobID}
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

// Scoped returns the scoped key coordd stores (commands.ClusterScopedKey and
// friends), or why k is invalid.
func (k IdempotencyKey) Scoped() (string, error) {
	switch strings.ToUpper(k.Scope) {
	case ScopeCluster:
		if k.ScopeID != 0 {
			return "", fmt.Errorf("a CLUSTER idempotency key takes scope id 0, got %d", k.ScopeID)
		}
		return commands.ClusterScopedKey(k.Key)
	case ScopeDatabase:
		return commands.DatabaseScopedKey(k.ScopeID, k.Key)
	case ScopeCollection:
		return commands.CollectionScopedKey(k.ScopeID, k.Key)
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
}

// Validate checks the spec with the rules the server applies to every
// broadcast (a built-in message type's payload is checked by the server
// only).
func (s BroadcastSpec) Validate() error {
	_, err := s.request()
	if err != nil {
		return stripInvalid(err)
	}
	return nil
}

// request checks the spec with the rules the server applies and converts
// it.
func (s BroadcastSpec) request() (*coordpb.BroadcastRequest, error) {
	req := &coordpb.BroadcastRequest{MessageType: s.MessageType, Payload: s.Payload, ResourceKeys: s.ResourceKeys,
		Vchannels: s.VChannels, AckSyncUp: s.AckSyncUp}
	probe := &logpb.CreateBroadcast{MessageType: s.MessageType, Payload: s.Payload, Vchannels: s.VChannels}
	for _, k := range s.ResourceKeys {
		d, ok := domains[strings.ToUpper(k.GetDomain())]
		if !ok {
			return nil, fmt.Errorf("unknown resource key domain %q (want one of %s)", k.GetDomain(), strings.Join(ResourceDomains(), ", "))
		}
		probe.ResourceKeys = append(probe.ResourceKeys, &logpb.ResourceKey{Domain: d, Key: k.GetKey(), Shared: k.GetShared()})
	}
	if ik := s.Idempotency; ik != nil {
		key, err := ik.Scoped()
		if err != nil {
			return nil, err
		}
		probe.IdempotencyKey = key
		req.IdempotencyKey = &coordpb.IdempotencyKey{Scope: strings.ToUpper(ik.Scope), ScopeId: ik.ScopeID, Key: ik.Key}
	}
	if len(probe.Vchannels) == 0 {
		probe.Vchannels = []string{"probe_0"} // coordd chooses the targets
	}
	if _, err := commands.New(probe, ""); err != nil {
		return nil, err
	}
	return req, nil
}

// Broadcast appends a message to every target atomically and in order,
// waits until every target acked and the ack callback ran, and returns the
// per-VChannel append results. A deadline ends only the wait: the task
// goes on (see GetBroadcast).
//
// With an idempotency key a retry is safe (it returns the same task), so
// the call is retried like a read. Without one, a retry after an attempt
// whose outcome is unknown may broadcast a second time, so it is retried
// at most Config.OutcomeUnknownRetries times after such an attempt.
func (c *Client) Broadcast(ctx context.Context, spec BroadcastSpec) (*coordpb.BroadcastResponse, error) {
	req, err := spec.request()
	if err != nil {
		return nil, localError("Broadcast", stripInvalid(err))
	}
	kind := longMutation
	if req.IdempotencyKey != nil {
		kind = longRetrySafe
	}
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
	body := &logpb.AckBroadcast{BroadcastId: id, FromNode: nodeID, FromEpoch: epoch}
	for _, cp := range checkpoints {
		body.Checkpoints = append(body.Checkpoints, &logpb.VChannelCheckpoint{Vchannel: cp.GetVchannel(), Term: cp.GetTerm(),
			Offset: cp.GetOffset(), TimeTick: cp.GetTimeTick()})
	}
	if _, err := commands.New(body, ""); err != nil {
		return localError(op, stripInvalid(err))
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
	if _, err := commands.New(&logpb.AbandonBroadcast{BroadcastId: id, Reason: reason}, ""); err != nil {
		return localError(op, stripInvalid(err))
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
	return marshalPayload(&logpb.CreateCollectionPayload{CollectionId: collectionID, Shards: shards})
}

// DropCollectionPayload is the payload of a DropCollection broadcast.
func DropCollectionPayload(collectionID int64) []byte {
	return marshalPayload(&logpb.DropCollectionPayload{CollectionId: collectionID})
}

func marshalPayload(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err) // scalar fields only: cannot fail
	}
	return b
}

// stripInvalid drops the "invalid argument: " prefix of commands' errors
// (the status code says it already).
func stripInvalid(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), commands.ErrInvalid.Error()+": "))
}
