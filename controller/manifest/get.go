package manifest

import (
	"context"
	"fmt"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Get answers GetSegmentManifest from st: the published pointer, the
// decoded revision it names (none at version 0) and the catalog's stats
// fields and SegmentIndex records.
func (c *Committer) Get(ctx context.Context, st *fsm.State, seg int64) (*coordpb.GetSegmentManifestResponse, error) {
	if seg <= 0 {
		return nil, invalidf("segment_id must be positive, got %d", seg)
	}
	p, ok, err := st.ManifestPointer(seg)
	if !ok {
		return nil, vocab.Errorf(ErrNotFound, "segment %d does not exist", seg)
	}
	if err != nil {
		return nil, fmt.Errorf("segment %d holds an unreadable manifest pointer: %w", seg, err)
	}
	out := &coordpb.GetSegmentManifestResponse{SegmentId: seg, Base: p.Base, Version: p.Version,
		CatalogStats: StatsOf(st.SegmentStats(seg)), IndexRecords: IndexRecordsOf(st.SegmentIndexes(seg))}
	if p.Version == 0 {
		return out, nil
	}
	if c.cfg.Store == nil {
		return nil, ErrNoStore
	}
	if out.Revision, err = c.read(ctx, p); err != nil {
		return nil, fmt.Errorf("read revision %s of segment %d: %w", p.Key(), seg, err)
	}
	return out, nil
}
