package manifest

import (
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
)

var catalogStates = map[string]logpb.SegmentState{
	"": logpb.SegmentState_SEGMENT_UNKNOWN, "Flushed": logpb.SegmentState_SEGMENT_FLUSHED, "Dropped": logpb.SegmentState_SEGMENT_DROPPED,
}

var newSegmentLevels = map[string]logpb.SegmentLevel{
	"": logpb.SegmentLevel_LEVEL_L1, "L1": logpb.SegmentLevel_LEVEL_L1, "L2": logpb.SegmentLevel_LEVEL_L2,
}

// catalogOf converts the API's catalog mutation to the log's.
func catalogOf(seg int64, c *coordpb.CatalogMutation) (*logpb.ManifestCatalogMutation, error) {
	if c == nil {
		return nil, nil
	}
	st, ok := catalogStates[c.State]
	if !ok {
		return nil, invalidf("catalog state must be \"\", \"Flushed\" or \"Dropped\", got %q", c.State)
	}
	out := &logpb.ManifestCatalogMutation{State: st, IndexRemoves: c.IndexRemoves}
	if c.NumOfRows != nil {
		out.SetNumOfRows, out.NumOfRows = true, *c.NumOfRows
	}
	for _, s := range c.Stats {
		out.Stats = append(out.Stats, &logpb.ManifestStats{Key: s.Key, Files: s.Files})
	}
	for _, ix := range c.IndexUpserts {
		out.IndexUpserts = append(out.IndexUpserts, &logpb.SegmentIndexRecord{BuildId: ix.BuildId, SegmentId: seg,
			IndexId: ix.IndexId, FieldId: ix.FieldId, Files: ix.Files, SerializedSize: ix.SerializedSize})
	}
	if ns := c.NewSegment; ns != nil {
		lv, ok := newSegmentLevels[ns.Level]
		if !ok {
			return nil, invalidf("a new segment's level is L1 or L2, got %q", ns.Level)
		}
		out.NewSegment = &logpb.ManifestNewSegment{CollectionId: ns.CollectionId, PartitionId: ns.PartitionId,
			Vchannel: ns.Vchannel, Level: lv, NumOfRows: ns.NumOfRows}
	}
	return out, nil
}

// StatsOf converts catalog stats records to the API's form.
func StatsOf(in []*logpb.ManifestStats) []*coordpb.ManifestStatsEntry {
	var out []*coordpb.ManifestStatsEntry
	for _, s := range in {
		out = append(out, &coordpb.ManifestStatsEntry{Key: s.Key, Files: s.Files})
	}
	return out
}

// IndexRecordsOf converts SegmentIndex records to the API's form.
func IndexRecordsOf(in []*logpb.SegmentIndexRecord) []*coordpb.ManifestIndexEntry {
	var out []*coordpb.ManifestIndexEntry
	for _, r := range in {
		out = append(out, &coordpb.ManifestIndexEntry{BuildId: r.BuildId, IndexId: r.IndexId, FieldId: r.FieldId,
			Files: r.Files, SerializedSize: r.SerializedSize})
	}
	return out
}
