package commands

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/coordd/coordd/commands/logpb"
)

// Type identifies a command's body message. Blocks of numbers belong to
// subsystems: 0x0001.. core, 0x0100.. channels, 0x0200.. broadcast, 0x0300.. segments, 0x0400.. segment manifests, 0x0500.. access control.
type Type uint32

// Ignorable marks a type that an older replica may skip when it does not know it.
const Ignorable Type = 0x8000

const (
	TypeLeaderEstablished Type = 0x0001
	TypeUpsertMember      Type = 0x0002
	TypeRemoveMember      Type = 0x0003
	TypeExtendTSOWindow   Type = 0x0004
	TypeReserveIDs        Type = 0x0005
	// 0x0006 and 0x0007 are left free.
	TypeRaiseAllocatorFloors Type = 0x0008

	TypeInitStreaming                Type = 0x0101
	TypeAddPChannels                 Type = 0x0102
	TypeAssignPChannels              Type = 0x0103
	TypeAssignPChannelsDone          Type = 0x0104
	TypeMarkPChannelsUnavailable     Type = 0x0105
	TypeRecordAssignFailure          Type = 0x0106
	TypeRegisterStreamingNode        Type = 0x0107
	TypeMarkStreamingNodeDown        Type = 0x0108
	TypeSetStreamingNodeDrain        Type = 0x0109
	TypeAllocVirtualChannels         Type = 0x010A
	TypeDropVirtualChannels          Type = 0x010B
	TypeUpdateReplicateConfiguration Type = 0x010C
	TypeResetReplicateRole           Type = 0x010D

	TypeCreateBroadcast          Type = 0x0201
	TypeAckBroadcast             Type = 0x0202
	TypeCompleteBroadcast        Type = 0x0203
	TypeAbandonBroadcast         Type = 0x0204
	TypePruneBroadcastTombstones Type = 0x0205

	TypeCreateSegment            Type = 0x0301
	TypeSealSegments             Type = 0x0302
	TypeMarkSegmentsFlushing     Type = 0x0303
	TypeSaveBinlogPaths          Type = 0x0304
	TypeUpdateChannelCheckpoints Type = 0x0305
	TypePruneDroppedSegments     Type = 0x0306
	TypeCreateImportSegment      Type = 0x0307
	TypeFinishImportSegment      Type = 0x0308
	// TypePruneDroppedVChannels is ignorable: a replica older than it
	// keeps the dropped VChannels' sentinels, which changes no answer but
	// GetRecoveryInfo's for a VChannel dropped hours ago (dropped rather
	// than unknown); once upgraded, its next prune forgets them too.
	TypePruneDroppedVChannels Type = Ignorable | 0x0309

	TypeCommitSegmentManifests  Type = 0x0401
	TypeRetireManifestRevisions Type = 0x0402
	TypeCreateToken             Type = 0x0500
	TypeRevokeToken             Type = 0x0501
)

// spec describes how one command type is encoded.
type spec struct {
	name    string
	version uint32 // the newest body version this binary writes and reads
	newBody func() proto.Message
}

// registry lists every command this binary understands. It is a fixed table,
// built at compile time; adding a command means adding a line here.
var registry = map[Type]spec{
	TypeLeaderEstablished:    {"LeaderEstablished", 1, func() proto.Message { return &logpb.LeaderEstablished{} }},
	TypeUpsertMember:         {"UpsertMember", 1, func() proto.Message { return &logpb.UpsertMember{} }},
	TypeRemoveMember:         {"RemoveMember", 1, func() proto.Message { return &logpb.RemoveMember{} }},
	TypeExtendTSOWindow:      {"ExtendTSOWindow", 1, func() proto.Message { return &logpb.ExtendTSOWindow{} }},
	TypeReserveIDs:           {"ReserveIDs", 1, func() proto.Message { return &logpb.ReserveIDs{} }},
	TypeRaiseAllocatorFloors: {"RaiseAllocatorFloors", 1, func() proto.Message { return &logpb.RaiseAllocatorFloors{} }},

	TypeInitStreaming:            {"InitStreaming", 1, func() proto.Message { return &logpb.InitStreaming{} }},
	TypeAddPChannels:             {"AddPChannels", 1, func() proto.Message { return &logpb.AddPChannels{} }},
	TypeAssignPChannels:          {"AssignPChannels", 1, func() proto.Message { return &logpb.AssignPChannels{} }},
	TypeAssignPChannelsDone:      {"AssignPChannelsDone", 1, func() proto.Message { return &logpb.AssignPChannelsDone{} }},
	TypeMarkPChannelsUnavailable: {"MarkPChannelsUnavailable", 1, func() proto.Message { return &logpb.MarkPChannelsUnavailable{} }},
	TypeRecordAssignFailure:      {"RecordAssignFailure", 1, func() proto.Message { return &logpb.RecordAssignFailure{} }},
	// RegisterStreamingNode v2 adds bound_node (per-node identity): a v1
	// replica would record a session without its binding, so it must stop.
	TypeRegisterStreamingNode:        {"RegisterStreamingNode", 2, func() proto.Message { return &logpb.RegisterStreamingNode{} }},
	TypeMarkStreamingNodeDown:        {"MarkStreamingNodeDown", 1, func() proto.Message { return &logpb.MarkStreamingNodeDown{} }},
	TypeSetStreamingNodeDrain:        {"SetStreamingNodeDrain", 1, func() proto.Message { return &logpb.SetStreamingNodeDrain{} }},
	TypeAllocVirtualChannels:         {"AllocVirtualChannels", 1, func() proto.Message { return &logpb.AllocVirtualChannels{} }},
	TypeDropVirtualChannels:          {"DropVirtualChannels", 1, func() proto.Message { return &logpb.DropVirtualChannels{} }},
	TypeUpdateReplicateConfiguration: {"UpdateReplicateConfiguration", 1, func() proto.Message { return &logpb.UpdateReplicateConfiguration{} }},
	TypeResetReplicateRole:           {"ResetReplicateRole", 1, func() proto.Message { return &logpb.ResetReplicateRole{} }},

	// CreateBroadcast v2 adds after_broadcasts: a v1 replica would create a
	// task that v2 replicas refuse until its predecessors are tombstones, so
	// it must stop.
	TypeCreateBroadcast: {"CreateBroadcast", 2, func() proto.Message { return &logpb.CreateBroadcast{} }},
	// AckBroadcast v2 adds the sending session (from_node, from_epoch): a v1
	// replica would record an ack that v2 replicas refuse, so it must stop.
	// v3 accepts, from the channel's current owner, a checkpoint of an
	// earlier term (fsm/broadcast_ack.go): a v2 replica would refuse it.
	TypeAckBroadcast: {"AckBroadcast", 3, func() proto.Message { return &logpb.AckBroadcast{} }},
	// CompleteBroadcast v2 carries the last FastAck checkpoints: a v1
	// replica would ignore them and refuse the completion that v2 replicas
	// apply, so it must stop.
	TypeCompleteBroadcast:        {"CompleteBroadcast", 2, func() proto.Message { return &logpb.CompleteBroadcast{} }},
	TypeAbandonBroadcast:         {"AbandonBroadcast", 1, func() proto.Message { return &logpb.AbandonBroadcast{} }},
	TypePruneBroadcastTombstones: {"PruneBroadcastTombstones", 1, func() proto.Message { return &logpb.PruneBroadcastTombstones{} }},

	// Segments. SaveBinlogPaths v2 adds after_dml: a v1 replica would append a save
	// that v2 replicas refuse as stale, so it must stop.
	TypeCreateSegment:            {"CreateSegment", 1, func() proto.Message { return &logpb.CreateSegment{} }},
	TypeSealSegments:             {"SealSegments", 1, func() proto.Message { return &logpb.SealSegments{} }},
	TypeMarkSegmentsFlushing:     {"MarkSegmentsFlushing", 1, func() proto.Message { return &logpb.MarkSegmentsFlushing{} }},
	TypeSaveBinlogPaths:          {"SaveBinlogPaths", 2, func() proto.Message { return &logpb.SaveBinlogPaths{} }},
	TypeUpdateChannelCheckpoints: {"UpdateChannelCheckpoints", 1, func() proto.Message { return &logpb.UpdateChannelCheckpoints{} }},
	TypePruneDroppedSegments:     {"PruneDroppedSegments", 1, func() proto.Message { return &logpb.PruneDroppedSegments{} }},
	TypePruneDroppedVChannels:    {"PruneDroppedVChannels", 1, func() proto.Message { return &logpb.PruneDroppedVChannels{} }},
	TypeCreateImportSegment:      {"CreateImportSegment", 1, func() proto.Message { return &logpb.CreateImportSegment{} }},
	TypeFinishImportSegment:      {"FinishImportSegment", 1, func() proto.Message { return &logpb.FinishImportSegment{} }},

	TypeCommitSegmentManifests:  {"CommitSegmentManifests", 1, func() proto.Message { return &logpb.CommitSegmentManifests{} }},
	TypeRetireManifestRevisions: {"RetireManifestRevisions", 1, func() proto.Message { return &logpb.RetireManifestRevisions{} }},
	// CreateToken v2 adds the proxy role and node-bound node tokens: a v1
	// replica would refuse (or mis-store) them, so it must stop.
	TypeCreateToken: {"CreateToken", 2, func() proto.Message { return &logpb.CreateToken{} }},
	TypeRevokeToken: {"RevokeToken", 1, func() proto.Message { return &logpb.RevokeToken{} }},
}

// String names the type for logs and errors.
func (t Type) String() string {
	if s, ok := registry[t]; ok {
		return s.name
	}
	return fmt.Sprintf("Type(0x%04x)", uint32(t))
}

// IsIgnorable reports whether a replica that does not know t may skip it.
func (t Type) IsIgnorable() bool { return t&Ignorable != 0 }

// typeByName maps a body message's full name back to its Type; derived from
// registry so the two can never disagree.
var typeByName = func() map[protoreflect.FullName]Type {
	m := make(map[protoreflect.FullName]Type, len(registry))
	for t, s := range registry {
		m[s.newBody().ProtoReflect().Descriptor().FullName()] = t
	}
	return m
}()

// TypeOf maps a body message to its Type.
func TypeOf(body proto.Message) (Type, bool) {
	t, ok := typeByName[body.ProtoReflect().Descriptor().FullName()]
	return t, ok
}
