package commands

import (
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// 0x0300.. segments: fixed samples (every field set) for the golden files.
// Kept beside the block so the shared sample table stays small.
func init() {
	pos := func(term int64, off, ts uint64) *logpb.WALPosition {
		return &logpb.WALPosition{Term: term, Offset: off, Timestamp: ts}
	}
	log := func(id int64) *logpb.LogRef {
		return &logpb.LogRef{LogId: id, EntriesNum: 1000, TimestampFrom: 449326301000000, TimestampTo: 449326302000000, MemorySize: 65536}
	}
	for typ, mk := range map[Type]func() proto.Message{
		TypeCreateSegment: func() proto.Message {
			return &logpb.CreateSegment{CollectionId: 449326211, PartitionId: 449326212,
				Vchannel: "by-dev-rootcoord-dml_1_449326211v0", NodeId: 3, PchannelTerm: 4}
		},
		TypeSealSegments: func() proto.Message {
			return &logpb.SealSegments{SegmentIds: []int64{449326400, 449326401}, CollectionId: 449326211,
				SealTs: 449326303000000, Reason: logpb.SealReason_SEAL_CAPACITY, DecisionTerm: 7}
		},
		TypeMarkSegmentsFlushing: func() proto.Message {
			return &logpb.MarkSegmentsFlushing{SegmentIds: []int64{449326400}, DecisionTerm: 7}
		},
		TypeSaveBinlogPaths: func() proto.Message {
			return &logpb.SaveBinlogPaths{
				NodeId: 3, Vchannel: "by-dev-rootcoord-dml_1_449326211v0", PchannelTerm: 4,
				SegmentId: 449326400, CollectionId: 449326211, PartitionId: 449326212, Level: logpb.SegmentLevel_LEVEL_L1,
				Binlogs:        []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{log(449326500)}}},
				Statslogs:      []*logpb.FieldLogs{{FieldId: 100, Logs: []*logpb.LogRef{log(449326501)}}},
				Deltalogs:      []*logpb.LogRef{log(449326502)},
				Checkpoints:    []*logpb.SegmentCheckpointUpdate{{SegmentId: 449326400, Position: pos(4, 120, 449326302000000), NumOfRows: 1000}},
				StartPositions: []*logpb.SegmentStartUpdate{{SegmentId: 449326400, Position: pos(4, 100, 449326301000000)}},
				Flushed:        true, Dropped: true, WithFullBinlogs: true, StorageVersion: 2,
				ManifestPath: `{"base":"manifests/449326400","ver":1}`, AfterDml: true,
			}
		},
		TypePruneDroppedSegments: func() proto.Message {
			return &logpb.PruneDroppedSegments{RetentionMs: 10800000, MaxCount: 1024, DecisionTerm: 7}
		},
		TypePruneDroppedVChannels: func() proto.Message {
			return &logpb.PruneDroppedVChannels{RetentionMs: 10800000, MaxCount: 1024, DecisionTerm: 7}
		},
		TypeUpdateChannelCheckpoints: func() proto.Message {
			return &logpb.UpdateChannelCheckpoints{NodeId: 3, Checkpoints: []*logpb.ChannelCheckpointUpdate{
				{Vchannel: "by-dev-rootcoord-dml_1_449326211v0", PchannelTerm: 4, Position: pos(4, 120, 449326302000000)},
			}}
		},
	} {
		fixedSamples[typ] = mk
	}
}
