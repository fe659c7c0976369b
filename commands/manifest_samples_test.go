package commands

import (
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// 0x0400.. segment manifests: a fixed sample (every field set) for the
// golden files.
func init() {
	fixedSamples[TypeRetireManifestRevisions] = func() proto.Message {
		return &logpb.RetireManifestRevisions{Retirements: []*logpb.ManifestRetirement{
			{Base: "manifest/449326211/449326212/449326400", From: 4, Through: 6}}}
	}
	fixedSamples[TypeCommitSegmentManifests] = func() proto.Message {
		return &logpb.CommitSegmentManifests{Publishes: []*logpb.ManifestPublish{{
			SegmentId: 449326400,
			Base:      `{"ver":2,"base_path":"manifest/449326211/449326212/449326400"}`,
			Next:      `{"ver":3,"base_path":"manifest/449326211/449326212/449326400"}`,
			Prepared:  true, CheckExpected: true, ExpectedVersion: 2,
			Catalog: &logpb.ManifestCatalogMutation{
				State: logpb.SegmentState_SEGMENT_FLUSHED,
				Stats: []*logpb.ManifestStats{{Key: "text:101", Files: []string{"stats/449326400/text-101-0"}}},
				IndexUpserts: []*logpb.SegmentIndexRecord{{BuildId: 449326600, SegmentId: 449326400, CollectionId: 449326211,
					IndexId: 449326601, FieldId: 101, Files: []string{"index/449326600/0"}, SerializedSize: 4096, PublishedVersion: 3}},
				IndexRemoves: []int64{449326599},
				NewSegment: &logpb.ManifestNewSegment{CollectionId: 449326211, PartitionId: 449326212,
					Vchannel: "by-dev-rootcoord-dml_1_449326211v0", Level: logpb.SegmentLevel_LEVEL_L2, NumOfRows: 1000},
				SetNumOfRows: true, NumOfRows: 1000,
			},
		}}}
	}
}
