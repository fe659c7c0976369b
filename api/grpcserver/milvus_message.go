package grpcserver

import (
	"encoding/base64"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/milvuspb"
	"github.com/coordd/coordd/vocab"
)

// The message properties coordd reads and writes on Milvus's messages
// (docs/milvus.md#message-properties). Their encodings are Milvus's: the
// type as a decimal number, headers as standard base64 of their proto
// encoding, time ticks as base-36 numbers, message IDs as their WAL's text.
const (
	propType          = "_t"
	propVChannel      = "_vc"
	propBroadcast     = "_bh"
	propHeader        = "_h"
	propTimeTick      = "_tt"
	propLastConfirmed = "_lc"
)

// milvusPayloadField is the field of a built-in payload (CreateCollection,
// DropCollection) that carries the Milvus message the payload was made
// from: coordd's callbacks read fields 1 and 2 and keep this one as an
// unknown field, and the streaming nodes append the whole payload, so the
// Milvus message is in the log as sent (docs/milvus.md#payloads).
const milvusPayloadField = 100

// milvusMessage is a broadcast message read from Milvus's properties.
type milvusMessage struct {
	typ    milvuspb.MessageType
	header *milvuspb.BroadcastHeader
	raw    *milvuspb.Message
}

// readMilvusBroadcast reads and checks the properties of a Milvus
// broadcast message: a known type and a broadcast header with targets and
// no broadcast ID (coordd assigns it).
func readMilvusBroadcast(m *milvuspb.Message) (milvusMessage, error) {
	bad := func(format string, a ...any) error {
		return milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, format, a...)
	}
	if m == nil {
		return milvusMessage{}, bad("the request carries no message")
	}
	t, ok := m.Properties[propType]
	if !ok {
		return milvusMessage{}, bad("the message has no type (property %s)", propType)
	}
	n, err := strconv.ParseInt(t, 10, 32)
	if err != nil {
		return milvusMessage{}, bad("message type %q (property %s) is not a number", t, propType)
	}
	typ := milvuspb.MessageType(n)
	if _, known := milvuspb.MessageType_name[int32(n)]; !known || typ == milvuspb.MessageType_Unknown {
		return milvusMessage{}, bad("message type %d is not a Milvus 2.6 message type", n)
	}
	bh, ok := m.Properties[propBroadcast]
	if !ok {
		return milvusMessage{}, bad("the message has no broadcast header (property %s): only broadcast messages can be broadcast", propBroadcast)
	}
	var h milvuspb.BroadcastHeader
	if err := decodeProp(bh, &h); err != nil {
		return milvusMessage{}, bad("broadcast header (property %s): %v", propBroadcast, err)
	}
	if len(h.Vchannels) == 0 {
		return milvusMessage{}, bad("the broadcast header names no vchannels")
	}
	if h.BroadcastId != 0 {
		return milvusMessage{}, bad("the broadcast header carries broadcast id %d: coordd assigns it", h.BroadcastId)
	}
	if _, ok := m.Properties[propVChannel]; ok {
		return milvusMessage{}, bad("a broadcast message names no single vchannel (property %s is set)", propVChannel)
	}
	return milvusMessage{typ: typ, header: &h, raw: m}, nil
}

// decodeProp reads a header property: base64 of a proto encoding.
func decodeProp(v string, m proto.Message) error {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

// milvusDomains maps Milvus's resource domains onto coordd's. The key
// texts are the same in both ("<db>:<collection>" for a collection name,
// "<db>" for a database, "" for the cluster and privilege keys).
var milvusDomains = map[milvuspb.ResourceDomain]vocab.ResourceDomain{
	milvuspb.ResourceDomain_ResourceDomainCollectionName: vocab.DomainCollectionName,
	milvuspb.ResourceDomain_ResourceDomainDBName:         vocab.DomainDBName,
	milvuspb.ResourceDomain_ResourceDomainPrivilege:      vocab.DomainPrivilege,
	milvuspb.ResourceDomain_ResourceDomainCluster:        vocab.DomainCluster,
	milvuspb.ResourceDomain_ResourceDomainImportJobID:    vocab.DomainImportJobID,
}

// coorddKeys converts the header's resource keys into coordd's API's
// (domains by their vocab.ResourceDomain names); an unknown domain is
// refused.
func coorddKeys(h *milvuspb.BroadcastHeader) ([]*coordpb.ResourceKey, error) {
	out := make([]*coordpb.ResourceKey, 0, len(h.ResourceKeys))
	for _, k := range h.ResourceKeys {
		d, ok := milvusDomains[k.Domain]
		if !ok {
			return nil, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT,
				"resource key %q has domain %d, which is not one of Milvus's (CollectionName, DBName, Privilege, Cluster, ImportJobID)", k.Key, int32(k.Domain))
		}
		out = append(out, &coordpb.ResourceKey{Domain: string(d), Key: k.Key, Shared: k.Shared})
	}
	return out, nil
}

// coorddPayload is the payload coordd stores and appends for m: the Milvus
// message's encoding, or for a type whose callback coordd runs, that
// callback's payload made from the typed header (_h) with the Milvus
// message in field milvusPayloadField.
func coorddPayload(mm milvusMessage) ([]byte, error) {
	raw, err := proto.Marshal(mm.raw)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, format, a...)
	}
	var builtin proto.Message
	switch mm.typ {
	case milvuspb.MessageType_CreateCollection:
		var h milvuspb.CreateCollectionMessageHeader
		if err := decodeProp(mm.raw.Properties[propHeader], &h); err != nil || h.CollectionId <= 0 {
			return nil, bad("a CreateCollection needs its header (property %s) with a positive collection id", propHeader)
		}
		shards := 0
		for _, v := range mm.header.Vchannels {
			if vocab.PChannelOf(v) != v && !strings.HasSuffix(v, vocab.CChannelSuffix) { // a VChannel, not the control channel or a PChannel
				shards++
			}
		}
		builtin = &coordpb.CreateCollectionPayload{CollectionId: h.CollectionId, Shards: uint32(shards)}
	case milvuspb.MessageType_DropCollection:
		var h milvuspb.DropCollectionMessageHeader
		if err := decodeProp(mm.raw.Properties[propHeader], &h); err != nil || h.CollectionId <= 0 {
			return nil, bad("a DropCollection needs its header (property %s) with a positive collection id", propHeader)
		}
		builtin = &coordpb.DropCollectionPayload{CollectionId: h.CollectionId}
	case milvuspb.MessageType_AlterReplicateConfig:
		return nil, bad("AlterReplicateConfig is not broadcast through Broadcast: call UpdateReplicateConfiguration")
	default:
		return raw, nil
	}
	b, err := proto.Marshal(builtin)
	if err != nil {
		return nil, err
	}
	b = protowire.AppendTag(b, milvusPayloadField, protowire.BytesType)
	return protowire.AppendBytes(b, raw), nil
}

// milvusMessageID is a coordd WAL position as a Milvus message ID: the WAL
// name Test, and the offset in decimal, the text Milvus's test WAL uses
// (docs/milvus.md#message-ids).
func milvusMessageID(offset uint64) *milvuspb.MessageID {
	return &milvuspb.MessageID{Id: strconv.FormatUint(offset, 10), WALName: milvuspb.WALName_Test}
}

// offsetOfMessageID reads milvusMessageID back.
func offsetOfMessageID(id *milvuspb.MessageID) (uint64, error) {
	if id == nil {
		return 0, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "the message has no message id")
	}
	if id.WALName != milvuspb.WALName_Test {
		return 0, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT,
			"message id of WAL %s: coordd's positions are message ids of WAL Test", id.WALName)
	}
	off, err := strconv.ParseUint(id.Id, 10, 64)
	if err != nil {
		return 0, milvusRefusal(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "message id %q is not a coordd position: %v", id.Id, err)
	}
	return off, nil
}
