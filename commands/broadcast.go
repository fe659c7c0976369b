package commands

import (
	"sort"
	"strconv"
	"strings"

	"github.com/coordd/coordd/commands/logpb"
)

// Broadcast message types whose ack callbacks coordd runs itself. The other
// known types (KnownMessageTypes; clients may send no others) are
// broadcast, acked and recorded with no callback.
const (
	MsgCreateCollection     = "CreateCollection"
	MsgDropCollection       = "DropCollection"
	MsgAlterReplicateConfig = "AlterReplicateConfig"
	MsgFlushAll             = "FlushAll"
)

// Broadcast limits.
const (
	MaxBroadcastPayload     = 512 << 10
	MaxBroadcastTargets     = 4096
	MaxResourceKeys         = 64
	MaxResourceKeyBytes     = 512
	MaxIdempotencyKeyBytes  = 256 // the client part, printable ASCII
	maxScopedKeyBytes       = MaxIdempotencyKeyBytes + 64
	MaxBroadcastMessageType = 64
)

// ClusterScopedKey, DatabaseScopedKey and CollectionScopedKey build the only
// idempotency keys the broadcaster accepts. The scope embeds object IDs,
// never names (a rename must not make a retry look new), and the encoding
// is injective: "<scope>/<id>/<len>:<key>".
func ClusterScopedKey(key string) (string, error) { return scoped("cluster", 0, key) }

// DatabaseScopedKey scopes key to one database.
func DatabaseScopedKey(dbID int64, key string) (string, error) {
	if dbID <= 0 {
		return "", invalid("database id must be positive, got %d", dbID)
	}
	return scoped("db", dbID, key)
}

// CollectionScopedKey scopes key to one collection.
func CollectionScopedKey(collectionID int64, key string) (string, error) {
	if collectionID <= 0 {
		return "", invalid("collection id must be positive, got %d", collectionID)
	}
	return scoped("coll", collectionID, key)
}

func scoped(scope string, id int64, key string) (string, error) {
	if err := ValidateIdempotencyKey(key); err != nil {
		return "", err
	}
	return scope + "/" + strconv.FormatInt(id, 10) + "/" + strconv.Itoa(len(key)) + ":" + key, nil
}

// ValidateIdempotencyKey: 1..256 bytes of printable ASCII.
func ValidateIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyBytes {
		return invalid("idempotency key must be 1..%d bytes, got %d", MaxIdempotencyKeyBytes, len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return invalid("idempotency key: byte %d (0x%02x) is not printable ASCII", i, key[i])
		}
	}
	return nil
}

// validateScopedKey checks a key produced by one of the constructors.
func validateScopedKey(s string) error {
	scope, rest, ok := strings.Cut(s, "/")
	if !ok || (scope != "cluster" && scope != "db" && scope != "coll") {
		return invalid("idempotency key %.40q is not scoped (use a cluster, database or collection scope)", s)
	}
	id, rest, ok := strings.Cut(rest, "/")
	n, key, ok2 := strings.Cut(rest, ":")
	idv, err := strconv.ParseInt(id, 10, 64)
	if !ok || !ok2 || err != nil || (scope == "cluster") != (idv == 0) || idv < 0 {
		return invalid("idempotency key %.40q: malformed scope", s)
	}
	if l, err := strconv.Atoi(n); err != nil || l != len(key) {
		return invalid("idempotency key %.40q: length prefix does not match", s)
	}
	want, err := scoped(scope, idv, key)
	if err != nil {
		return err
	}
	if want != s {
		return invalid("idempotency key %.40q is not in canonical form", s)
	}
	return nil
}

// ValidateMessageType: 1..64 bytes of [A-Za-z0-9_].
func ValidateMessageType(t string) error {
	if t == "" || len(t) > MaxBroadcastMessageType {
		return invalid("message type must be 1..%d bytes, got %d", MaxBroadcastMessageType, len(t))
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return invalid("message type %q: character %q not allowed", t, c)
		}
	}
	return nil
}

// ValidateBroadcastTarget accepts a VChannel, CChannel or PChannel name
// (cluster-level messages target PChannels).
func ValidateBroadcastTarget(name string) error {
	if ValidatePChannelName(name) == nil {
		return nil
	}
	return ValidateVChannelName(name)
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

func validateResourceKeys(keys []*logpb.ResourceKey) error {
	if len(keys) > MaxResourceKeys {
		return invalid("%d resource keys (max %d)", len(keys), MaxResourceKeys)
	}
	for _, k := range keys {
		switch k.Domain {
		case logpb.ResourceDomain_RK_CLUSTER, logpb.ResourceDomain_RK_PRIVILEGE:
			if k.Key != "" {
				return invalid("resource key domain %s takes no key, got %q", k.Domain, k.Key)
			}
		case logpb.ResourceDomain_RK_DB_NAME, logpb.ResourceDomain_RK_COLLECTION_NAME,
			logpb.ResourceDomain_RK_SNAPSHOT_NAME, logpb.ResourceDomain_RK_IMPORT_JOB_ID:
			if k.Key == "" || len(k.Key) > MaxResourceKeyBytes {
				return invalid("resource key %s needs a key of 1..%d bytes", k.Domain, MaxResourceKeyBytes)
			}
		default:
			return invalid("unknown resource key domain %d", k.Domain)
		}
	}
	return nil
}

// ValidateBroadcastRequest checks a CreateBroadcast as a CreateBroadcast
// command is checked, except that it may have no targets yet (the
// broadcaster chooses them), and that a built-in type's payload must be
// readable by its callback.
func ValidateBroadcastRequest(b *logpb.CreateBroadcast) error {
	if err := ValidateMessageType(b.MessageType); err != nil {
		return err
	}
	if len(b.Payload) > MaxBroadcastPayload {
		return invalid("payload is %d bytes (max %d)", len(b.Payload), MaxBroadcastPayload)
	}
	if err := validateResourceKeys(b.ResourceKeys); err != nil {
		return err
	}
	if len(b.Vchannels) > MaxBroadcastTargets {
		return invalid("a broadcast needs 1..%d target channels, got %d", MaxBroadcastTargets, len(b.Vchannels))
	}
	seen := map[string]bool{}
	for _, v := range b.Vchannels {
		if err := ValidateBroadcastTarget(v); err != nil {
			return err
		}
		if seen[v] {
			return invalid("target %s listed twice", v)
		}
		seen[v] = true
	}
	if b.IdempotencyKey != "" {
		if err := validateScopedKey(b.IdempotencyKey); err != nil {
			return err
		}
	}
	return ValidateBuiltinPayload(b.MessageType, b.Payload)
}

func validateBroadcastCommand(body any) (err error, ok bool) {
	switch b := body.(type) {
	case *logpb.CreateBroadcast:
		if len(b.Vchannels) == 0 {
			return invalid("a broadcast needs 1..%d target channels, got 0", MaxBroadcastTargets), true
		}
		return ValidateBroadcastRequest(b), true
	case *logpb.AckBroadcast:
		if b.BroadcastId == 0 || len(b.Checkpoints) == 0 || len(b.Checkpoints) > MaxBroadcastTargets {
			return invalid("ack needs a broadcast id and 1..%d checkpoints", MaxBroadcastTargets), true
		}
		if (b.FromNode == 0) != (b.FromEpoch == 0) {
			return invalid("an ack from a streaming node names both its node id and its epoch"), true
		}
		for _, cp := range b.Checkpoints {
			if err := ValidateBroadcastTarget(cp.Vchannel); err != nil {
				return err, true
			}
			if cp.Term < 1 || cp.TimeTick == 0 {
				return invalid("checkpoint of %s needs a term >= 1 and a time tick", cp.Vchannel), true
			}
		}
		return nil, true
	case *logpb.CompleteBroadcast:
		if b.BroadcastId == 0 {
			return invalid("broadcast id must be positive"), true
		}
		return nil, true
	case *logpb.AbandonBroadcast:
		if b.BroadcastId == 0 {
			return invalid("broadcast id must be positive"), true
		}
		if b.Reason == "" {
			return invalid("abandoning a broadcast needs a reason"), true
		}
		return checkReason(b.Reason), true
	case *logpb.PruneBroadcastTombstones:
		if b.MaxLifetimeMs <= 0 {
			return invalid("tombstone lifetime must be positive"), true
		}
		return nil, true
	}
	return nil, false
}
