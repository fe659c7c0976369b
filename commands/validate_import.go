package commands

import "github.com/coordd/coordd/commands/logpb"

// Shape checks of the import commands (docs/semantics.md#import-segments).
// Apply checks ownership, the segment's state and pointer ordering.

func validateCreateImportSegment(b *logpb.CreateImportSegment) error {
	if err := validateSegmentChannel(b.CollectionId, b.Vchannel); err != nil {
		return err
	}
	if b.PartitionId < 0 {
		return invalid("partition id must not be negative")
	}
	if b.Level != logpb.SegmentLevel_LEVEL_L1 && b.Level != logpb.SegmentLevel_LEVEL_L2 {
		return invalid("an import segment is L1 or L2, got level %d", b.Level)
	}
	return validateOwner(b.NodeId, b.PchannelTerm)
}

func validateFinishImportSegment(b *logpb.FinishImportSegment) error {
	if err := validateSegmentChannel(b.CollectionId, b.Vchannel); err != nil {
		return err
	}
	if err := validateOwner(b.NodeId, b.PchannelTerm); err != nil {
		return err
	}
	if b.SegmentId <= 0 {
		return invalid("segment id must be positive, got %d", b.SegmentId)
	}
	if b.NumOfRows < 0 {
		return invalid("segment %d: negative row count %d", b.SegmentId, b.NumOfRows)
	}
	p, err := ParseManifestPointer(b.ManifestPath)
	if err != nil {
		return err
	}
	if p.Version < 1 {
		return invalid("segment %d: finishing an import needs a manifest pointer with version >= 1, got %q", b.SegmentId, b.ManifestPath)
	}
	return nil
}
