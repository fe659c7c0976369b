package commands

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// ValidateBuiltinPayload checks that the payload of a message type whose
// callback coordd runs is readable by that callback; other types' payloads
// are opaque and always pass.
func ValidateBuiltinPayload(messageType string, payload []byte) error {
	switch messageType {
	case vocab.MsgCreateCollection:
		var p logpb.CreateCollectionPayload
		if err := proto.Unmarshal(payload, &p); err != nil {
			return invalid("%s payload: %v", messageType, err)
		}
		if p.CollectionId <= 0 {
			return invalid("%s payload: collection id must be positive, got %d", messageType, p.CollectionId)
		}
		if p.Shards == 0 || p.Shards > vocab.MaxVChannelsPerColl {
			return invalid("%s payload: shard count must be in 1..%d, got %d", messageType, vocab.MaxVChannelsPerColl, p.Shards)
		}
	case vocab.MsgDropCollection:
		var p logpb.DropCollectionPayload
		if err := proto.Unmarshal(payload, &p); err != nil {
			return invalid("%s payload: %v", messageType, err)
		}
		if p.CollectionId <= 0 {
			return invalid("%s payload: collection id must be positive, got %d", messageType, p.CollectionId)
		}
	case vocab.MsgAlterReplicateConfig:
		var p logpb.ReplicateConfiguration
		if err := proto.Unmarshal(payload, &p); err != nil {
			return invalid("%s payload: %v", messageType, err)
		}
		if err := ValidateReplicateConfiguration(&p); err != nil {
			return fmt.Errorf("%s payload: %w", messageType, err)
		}
	}
	return nil
}
