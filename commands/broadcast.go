package commands

import (
	"sort"
	"strconv"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// resourceDomains maps the log's resource-key domains to the shared
// vocabulary's (the API's spelling).
var resourceDomains = map[logpb.ResourceDomain]vocab.ResourceDomain{
	logpb.ResourceDomain_RK_CLUSTER: vocab.DomainCluster, logpb.ResourceDomain_RK_DB_NAME: vocab.DomainDBName,
	logpb.ResourceDomain_RK_COLLECTION_NAME: vocab.DomainCollectionName, logpb.ResourceDomain_RK_PRIVILEGE: vocab.DomainPrivilege,
	logpb.ResourceDomain_RK_SNAPSHOT_NAME: vocab.DomainSnapshotName, logpb.ResourceDomain_RK_IMPORT_JOB_ID: vocab.DomainImportJobID,
}

// ResourceDomainOf names a log domain in the shared vocabulary; a number
// the log does not define is returned as its decimal text, which
// vocab.ValidateResourceKeys refuses.
func ResourceDomainOf(d logpb.ResourceDomain) vocab.ResourceDomain {
	if v, ok := resourceDomains[d]; ok {
		return v
	}
	return vocab.ResourceDomain(strconv.Itoa(int(d)))
}

// LogResourceDomain is the log's number of a vocabulary domain.
func LogResourceDomain(d vocab.ResourceDomain) (logpb.ResourceDomain, bool) {
	for l, v := range resourceDomains {
		if v == d {
			return l, true
		}
	}
	return logpb.ResourceDomain_RK_UNKNOWN, false
}

// ResourceKeyID is the lock identity of a key: domain and key, not mode.
func ResourceKeyID(k *logpb.ResourceKey) string {
	return strconv.Itoa(int(k.Domain)) + "/" + k.Key
}

// NormalizeResourceKeys adds the shared Cluster key unless a Cluster key is
// present, merges duplicates (exclusive wins over shared) and sorts by
// (domain, key): the one order every locker acquires in.
func NormalizeResourceKeys(keys []*logpb.ResourceKey) []*logpb.ResourceKey {
	byID := map[string]*logpb.ResourceKey{}
	hasCluster := false
	for _, k := range keys {
		if k.Domain == logpb.ResourceDomain_RK_CLUSTER {
			hasCluster = true
		}
		id := ResourceKeyID(k)
		if prev, ok := byID[id]; ok {
			if !k.Shared {
				prev.Shared = false
			}
			continue
		}
		byID[id] = &logpb.ResourceKey{Domain: k.Domain, Key: k.Key, Shared: k.Shared}
	}
	if !hasCluster {
		byID[ResourceKeyID(&logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_CLUSTER})] =
			&logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_CLUSTER, Shared: true}
	}
	out := make([]*logpb.ResourceKey, 0, len(byID))
	for _, k := range byID {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Domain != out[j].Domain {
			return out[i].Domain < out[j].Domain
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// BroadcastShape is a CreateBroadcast in the shared vocabulary, for
// vocab.ValidateBroadcast.
func BroadcastShape(b *logpb.CreateBroadcast) vocab.Broadcast {
	keys := make([]vocab.ResourceKey, len(b.ResourceKeys))
	for i, k := range b.ResourceKeys {
		keys[i] = vocab.ResourceKey{Domain: ResourceDomainOf(k.Domain), Key: k.Key, Shared: k.Shared}
	}
	return vocab.Broadcast{MessageType: b.MessageType, Payload: b.Payload, ResourceKeys: keys,
		VChannels: b.Vchannels, IdempotencyKey: b.IdempotencyKey}
}

// ValidateBroadcastRequest checks a CreateBroadcast as a CreateBroadcast
// command is checked, except that it may have no targets yet (the
// broadcaster chooses them): the shared shape rule, then that a built-in
// type's payload is readable by its callback.
func ValidateBroadcastRequest(b *logpb.CreateBroadcast) error {
	if err := vocab.ValidateBroadcast(BroadcastShape(b)); err != nil {
		return invalidWrap(err)
	}
	return ValidateBuiltinPayload(b.MessageType, b.Payload)
}

func validateBroadcastCommand(body any) (err error, ok bool) {
	switch b := body.(type) {
	case *logpb.CreateBroadcast:
		if len(b.Vchannels) == 0 {
			return invalid("a broadcast needs 1..%d target channels, got 0", vocab.MaxBroadcastTargets), true
		}
		if err := validatePredecessors(b.AfterBroadcasts); err != nil {
			return err, true
		}
		return ValidateBroadcastRequest(b), true
	case *logpb.AckBroadcast:
		return invalidWrap(vocab.ValidateAck(b.BroadcastId, b.FromNode, b.FromEpoch, vocabCheckpoints(b.Checkpoints))), true
	case *logpb.CompleteBroadcast:
		if b.BroadcastId == 0 {
			return invalid("broadcast id must be positive"), true
		}
		if len(b.Checkpoints) == 0 {
			return nil, true
		}
		// The leader's own FastAck results: the rules of an ack from the
		// leader (no sending session).
		return invalidWrap(vocab.ValidateAck(b.BroadcastId, 0, 0, vocabCheckpoints(b.Checkpoints))), true
	case *logpb.AbandonBroadcast:
		return invalidWrap(vocab.ValidateAbandon(b.BroadcastId, b.Reason)), true
	case *logpb.PruneBroadcastTombstones:
		if b.MaxLifetimeMs <= 0 {
			return invalid("tombstone lifetime must be positive"), true
		}
		return nil, true
	}
	return nil, false
}

// MaxBroadcastPredecessors bounds CreateBroadcast.after_broadcasts; a
// leader with more conflicting tasks still finishing waits for them
// instead of pipelining (docs/semantics.md#resource-keys).
const MaxBroadcastPredecessors = 64

func validatePredecessors(ids []uint64) error {
	if len(ids) > MaxBroadcastPredecessors {
		return invalid("a broadcast is ordered behind at most %d tasks, got %d", MaxBroadcastPredecessors, len(ids))
	}
	seen := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		if id == 0 {
			return invalid("a predecessor broadcast id must be positive")
		}
		if seen[id] {
			return invalid("predecessor broadcast %d is listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

func vocabCheckpoints(in []*logpb.VChannelCheckpoint) []vocab.Checkpoint {
	cps := make([]vocab.Checkpoint, len(in))
	for i, cp := range in {
		cps[i] = vocab.Checkpoint{VChannel: cp.Vchannel, Term: cp.Term, TimeTick: cp.TimeTick}
	}
	return cps
}
