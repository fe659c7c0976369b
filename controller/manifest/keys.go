package manifest

import (
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/vocab"
)

// Object keys in revisions (docs/semantics.md#manifest-keys). Apply checks
// the keys a catalog mutation lists; the keys of a revision object only
// the leader sees, so it checks them here, with the same parse step
// (commands.ParseObjectKey), before any revision naming them is written
// or published: every file lies under the segment's own directories, an
// index file may also lie in its build's index layout.

// checkMutationKeys checks every key a commit's mutation adds.
func checkMutationKeys(req *coordpb.CommitSegmentManifestRequest, coll, part int64) error {
	id := req.SegmentId
	m := req.Mutation
	var groups []*coordpb.ManifestColumnGroup
	var deltas []string
	switch {
	case m.GetCreate() != nil:
		groups, deltas = m.GetCreate().ColumnGroups, m.GetCreate().DeltaLogs
	case m.GetAppendData() != nil:
		groups, deltas = m.GetAppendData().ColumnGroups, m.GetAppendData().DeltaLogs
	case m.GetReplaceData() != nil:
		groups, deltas = m.GetReplaceData().ColumnGroups, m.GetReplaceData().DeltaLogs
	}
	rev := &coordpb.ManifestRevision{SegmentId: id, ColumnGroups: groups, DeltaLogs: deltas,
		Stats: m.GetAddStats().GetStats(), Indexes: m.GetAddIndexes().GetIndexes()}
	if err := checkRevisionKeys(rev, coll, part); err != nil {
		return vocab.Errorf(commands.ErrInvalid, "segment %d: %w", id, err)
	}
	return nil
}

// checkRevisionKeys checks every key a revision lists.
func checkRevisionKeys(r *coordpb.ManifestRevision, coll, part int64) error {
	id := r.SegmentId
	for _, g := range r.ColumnGroups {
		if err := commands.SegmentKeys("column group files", g.Files, coll, part, id); err != nil {
			return err
		}
	}
	if err := commands.SegmentKeys("delta logs", r.DeltaLogs, coll, part, id); err != nil {
		return err
	}
	for _, s := range r.Stats {
		if err := commands.ValidateStatsKey(s.Key); err != nil {
			return err
		}
		if err := commands.StatsKeyFiles(s.Key, s.Files, coll, part, id); err != nil {
			return err
		}
	}
	for _, ix := range r.Indexes {
		if err := commands.IndexKeys(ix.BuildId, ix.Files, coll, part, id); err != nil {
			return err
		}
	}
	return nil
}
