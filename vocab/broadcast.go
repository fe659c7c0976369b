package vocab

import (
	"strconv"
	"strings"
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
	MaxBroadcastMessageType = 64
)

// Broadcast is the shape of one broadcast request: what a client sends and
// what a CreateBroadcast log entry carries, before coordd chose targets.
type Broadcast struct {
	MessageType  string
	Payload      []byte
	ResourceKeys []ResourceKey
	// VChannels may be empty: coordd then chooses the targets.
	VChannels []string
	// IdempotencyKey is a scoped key (ClusterScopedKey and friends), or
	// empty.
	IdempotencyKey string
}

// ValidateBroadcast checks a broadcast's shape: a well-formed message type,
// a payload of at most MaxBroadcastPayload bytes, valid resource keys, at
// most MaxBroadcastTargets distinct valid targets and, when set, a scoped
// idempotency key. A built-in message type's payload is opaque here (the
// log schema knows how to read it).
func ValidateBroadcast(b Broadcast) error {
	if err := ValidateMessageType(b.MessageType); err != nil {
		return err
	}
	if len(b.Payload) > MaxBroadcastPayload {
		return invalid("payload is %d bytes (max %d)", len(b.Payload), MaxBroadcastPayload)
	}
	if err := ValidateResourceKeys(b.ResourceKeys); err != nil {
		return err
	}
	if err := validateTargets(b.VChannels); err != nil {
		return err
	}
	if b.IdempotencyKey != "" {
		return ValidateScopedKey(b.IdempotencyKey)
	}
	return nil
}

// ValidateBroadcastTargets checks a broadcast's final target list (the
// leader's choice, or the request's own): 1..MaxBroadcastTargets channel
// names, none listed twice.
func ValidateBroadcastTargets(vs []string) error {
	if len(vs) == 0 {
		return invalid("a broadcast needs 1..%d target channels, got 0", MaxBroadcastTargets)
	}
	return validateTargets(vs)
}

// validateTargets checks at most MaxBroadcastTargets distinct target names
// (none: the broadcaster chooses them).
func validateTargets(vs []string) error {
	if len(vs) > MaxBroadcastTargets {
		return invalid("a broadcast needs 1..%d target channels, got %d", MaxBroadcastTargets, len(vs))
	}
	seen := make(map[string]bool, len(vs))
	for _, v := range vs {
		if err := ValidateBroadcastTarget(v); err != nil {
			return err
		}
		if seen[v] {
			return invalid("target %s listed twice", v)
		}
		seen[v] = true
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

// Checkpoint is a VChannel position a streaming node acks a broadcast at.
type Checkpoint struct {
	VChannel string
	Term     int64
	TimeTick uint64
}

// ValidateAck checks an ack of broadcast id: 1..MaxBroadcastTargets
// checkpoints on valid targets, each with a term >= 1 and a time tick, and
// a streaming-node session given whole (node and epoch) or not at all.
func ValidateAck(id, fromNode, fromEpoch uint64, checkpoints []Checkpoint) error {
	if id == 0 || len(checkpoints) == 0 || len(checkpoints) > MaxBroadcastTargets {
		return invalid("ack needs a broadcast id and 1..%d checkpoints", MaxBroadcastTargets)
	}
	if (fromNode == 0) != (fromEpoch == 0) {
		return invalid("an ack from a streaming node names both its node id and its epoch")
	}
	for _, cp := range checkpoints {
		if err := ValidateBroadcastTarget(cp.VChannel); err != nil {
			return err
		}
		if cp.Term < 1 || cp.TimeTick == 0 {
			return invalid("checkpoint of %s needs a term >= 1 and a time tick", cp.VChannel)
		}
	}
	return nil
}

// ValidateAbandon checks the abandoning of broadcast id: a positive id and
// a reason of 1..MaxReasonBytes bytes.
func ValidateAbandon(id uint64, reason string) error {
	if id == 0 {
		return invalid("broadcast id must be positive")
	}
	if reason == "" {
		return invalid("abandoning a broadcast needs a reason")
	}
	return ValidateReason(reason)
}

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

// ValidateScopedKey accepts exactly the keys one of the constructors
// (ClusterScopedKey and friends) produces.
func ValidateScopedKey(s string) error {
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
