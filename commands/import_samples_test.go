package commands

import (
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// Import segments: fixed samples (every field set) for the golden files.
func init() {
	const vch = "by-dev-rootcoord-dml_1_449326211v0"
	fixedSamples[TypeCreateImportSegment] = func() proto.Message {
		return &logpb.CreateImportSegment{CollectionId: 449326211, PartitionId: 449326212, Vchannel: vch,
			NodeId: 3, PchannelTerm: 4, Level: logpb.SegmentLevel_LEVEL_L2}
	}
	fixedSamples[TypeFinishImportSegment] = func() proto.Message {
		return &logpb.FinishImportSegment{SegmentId: 449326400, CollectionId: 449326211, Vchannel: vch, NodeId: 3, PchannelTerm: 4,
			ManifestPath: `{"ver":2,"base_path":"manifest/449326211/449326212/449326400"}`, NumOfRows: 1000}
	}
}
