package broadcaster

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
)

// The SDK writes built-in broadcast payloads with the public schema
// (coordpb) and the callbacks here read them with the log's (logpb): the
// two messages must be the same on the wire.

// TestBuiltinPayloadSchemasMatch: same field names, numbers, kinds and
// cardinalities, in both directions.
func TestBuiltinPayloadSchemasMatch(t *testing.T) {
	for _, pair := range [][2]proto.Message{
		{&coordpb.CreateCollectionPayload{}, &logpb.CreateCollectionPayload{}},
		{&coordpb.DropCollectionPayload{}, &logpb.DropCollectionPayload{}},
	} {
		api, log := pair[0].ProtoReflect().Descriptor(), pair[1].ProtoReflect().Descriptor()
		if api.Fields().Len() != log.Fields().Len() {
			t.Errorf("%s has %d fields, %s has %d", api.FullName(), api.Fields().Len(), log.FullName(), log.Fields().Len())
		}
		for i := 0; i < log.Fields().Len(); i++ {
			lf := log.Fields().Get(i)
			af := api.Fields().ByNumber(lf.Number())
			if af == nil || af.Name() != lf.Name() || af.Kind() != lf.Kind() || af.Cardinality() != lf.Cardinality() {
				t.Errorf("%s field %d (%s %s) has no twin in %s (got %v)", log.FullName(), lf.Number(), lf.Kind(), lf.Name(), api.FullName(), describe(af))
			}
		}
	}
}

func describe(f protoreflect.FieldDescriptor) string {
	if f == nil {
		return "none"
	}
	return string(f.Name()) + " " + f.Kind().String()
}

// TestBuiltinPayloadBytesMatch: for any values, both schemas marshal to the
// same bytes, and each decodes the other's.
func TestBuiltinPayloadBytesMatch(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	rapid.Check(t, func(t *rapid.T) {
		coll := rapid.Int64().Draw(t, "collection")
		shards := rapid.Uint32().Draw(t, "shards")
		apiCreate, err := det.Marshal(&coordpb.CreateCollectionPayload{CollectionId: coll, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		logCreate, err := det.Marshal(&logpb.CreateCollectionPayload{CollectionId: coll, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(apiCreate, logCreate) {
			t.Fatalf("CreateCollectionPayload(%d, %d): api %x, log %x", coll, shards, apiCreate, logCreate)
		}
		var back logpb.CreateCollectionPayload
		if err := proto.Unmarshal(apiCreate, &back); err != nil || back.CollectionId != coll || back.Shards != shards {
			t.Fatalf("log schema reads %v (%v) from the api bytes of (%d, %d)", &back, err, coll, shards)
		}
		apiDrop, err := det.Marshal(&coordpb.DropCollectionPayload{CollectionId: coll})
		if err != nil {
			t.Fatal(err)
		}
		logDrop, err := det.Marshal(&logpb.DropCollectionPayload{CollectionId: coll})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(apiDrop, logDrop) {
			t.Fatalf("DropCollectionPayload(%d): api %x, log %x", coll, apiDrop, logDrop)
		}
	})
}
