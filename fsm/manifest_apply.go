package fsm

import (
	"slices"
	"strings"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// StorageV3 is the storage version of segments whose files are listed in
// manifests.
const StorageV3 = 3

// applyCommitSegmentManifests publishes every listed segment's revision
// together with its catalog mutation, or nothing
// (docs/semantics.md#manifest-commit). Per publication, against the
// current record (not the leader's snapshot):
//   - a missing segment is NotFound unless the catalog creates it; a new
//     segment that exists already is stale (another commit created it);
//   - a Dropped segment is NotFound; in a batch it is skipped instead;
//   - a segment of storage version 1 or 2 is invalid;
//   - a structured commit needs the pointer to still be the base the
//     leader built on (base stability), else stale;
//   - a prepared revision needs the expected version (when given), the
//     same base path and a version not below the current one (equal: an
//     idempotent retry, success without change), else stale;
//   - every pointer lies at the segment's own base and never at a version
//     the orphan collector retired (a structured commit: stale; a prepared
//     one: invalid), and every object key the catalog mutation lists lies
//     under the segment's directories (invalid; docs/semantics.md#manifest-keys);
//   - the catalog mutation is applied to the current record (rebased over
//     whatever committed since the leader read it).
//
// The decision term fence (LeaderTerm) is checked before this runs.
func applyCommitSegmentManifests(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.CommitSegmentManifests)
	stage := publishStage{st: next, seg: next.seg, mf: next.mf, nowMs: c.ProposedAtUnixMs, batch: len(b.Publishes) > 1}
	out := &logpb.ManifestCommitResult{}
	for _, p := range b.Publishes {
		pub, rej := stage.publish(p)
		if rej != nil {
			return rej // nothing staged reaches next
		}
		out.Published = append(out.Published, pub)
	}
	next.seg, next.mf = stage.seg, stage.mf
	return &logpb.Result{Value: &logpb.Result_ManifestCommit{ManifestCommit: out}}
}

// publishStage accumulates a command's changes on copies of the segment
// and manifest maps; they replace next's only if every publication passes.
type publishStage struct {
	st    *State
	seg   segmentsState
	mf    manifestState
	nowMs int64
	batch bool
}

func staleManifest(seg, expected, current int64, why string) *logpb.Result {
	return reject(logpb.RejectCode_REJECT_STALE, "%s", vocab.StaleManifestMessage(seg, expected, current, why))
}

func (s *publishStage) publish(p *logpb.ManifestPublish) (*logpb.ManifestPublished, *logpb.Result) {
	next, _ := commands.ParseManifestPointer(p.Next) // shape-validated
	base, _ := commands.ParseManifestPointer(p.Base)
	cat := p.Catalog
	if cat == nil {
		cat = &logpb.ManifestCatalogMutation{}
	}
	g, exists := s.seg.segs.Get(p.SegmentId)
	var cur commands.ManifestPointer
	switch {
	case cat.NewSegment != nil:
		if exists {
			cur, _ = commands.ParseManifestPointer(g.ManifestPath)
			return nil, staleManifest(p.SegmentId, 0, cur.Version, "the new segment exists already")
		}
		ng, rej := s.newSegment(p.SegmentId, cat.NewSegment)
		if rej != nil {
			return nil, rej
		}
		g = ng
	case !exists:
		return nil, reject(logpb.RejectCode_REJECT_NOT_FOUND, "segment %d does not exist", p.SegmentId)
	case !g.Healthy():
		if s.batch {
			return &logpb.ManifestPublished{SegmentId: p.SegmentId, Skipped: true}, nil
		}
		return nil, reject(logpb.RejectCode_REJECT_NOT_FOUND, "segment %d is dropped", p.SegmentId)
	default:
		var err error
		if cur, err = commands.ParseManifestPointer(g.ManifestPath); err != nil {
			return nil, reject(logpb.RejectCode_REJECT_INVALID, "segment %d holds a pointer the manifest commit cannot read: %v", p.SegmentId, err)
		}
	}
	if g.StorageVersion != 0 && g.StorageVersion != StorageV3 {
		return nil, reject(logpb.RejectCode_REJECT_INVALID, "segment %d has storage version %d, manifests need %d", p.SegmentId, g.StorageVersion, StorageV3)
	}
	if rej := s.checkKeys(g, cat); rej != nil {
		return nil, rej
	}
	if p.Prepared {
		if p.CheckExpected && cur.Version != p.ExpectedVersion {
			return nil, staleManifest(p.SegmentId, p.ExpectedVersion, cur.Version, "expected manifest differs")
		}
		if cur.Base != "" && next.Base != cur.Base {
			return nil, reject(logpb.RejectCode_REJECT_INVALID, "segment %d: prepared revision at base %q, the segment's base is %q", p.SegmentId, next.Base, cur.Base)
		}
		if next.Version < cur.Version {
			return nil, staleManifest(p.SegmentId, next.Version, cur.Version, "prepared revision is older than the published one")
		}
		if next == cur {
			return &logpb.ManifestPublished{SegmentId: p.SegmentId, Version: cur.Version}, nil // idempotent retry
		}
	} else if cur != base {
		return nil, staleManifest(p.SegmentId, base.Version, cur.Version, "the pointer moved during manifest I/O")
	}
	if rej := s.st.checkPublication(g, cur, next, p.Prepared); rej != nil {
		return nil, rej
	}
	ng := *g
	if rej := s.applyCatalog(&ng, cat, next.Version); rej != nil {
		return nil, rej
	}
	ng.ManifestPath = next.String()
	ng.StorageVersion = StorageV3
	s.seg.put(&ng)
	return &logpb.ManifestPublished{SegmentId: p.SegmentId, Version: next.Version}, nil
}

// newSegment builds the record a publication creates (Flushed, StorageV3).
func (s *publishStage) newSegment(id int64, ns *logpb.ManifestNewSegment) (*Segment, *logpb.Result) {
	if uint64(id) >= s.st.alloc.nextID {
		return nil, reject(logpb.RejectCode_REJECT_INVALID, "segment id %d was never allocated (next id %d)", id, s.st.alloc.nextID)
	}
	if rej := s.st.checkCreatable(id); rej != nil {
		return nil, rej
	}
	if _, ok := s.st.knownVChannel(ns.Vchannel); !ok {
		return nil, reject(logpb.RejectCode_REJECT_NOT_FOUND, "vchannel %s is not a live vchannel", ns.Vchannel)
	}
	if s.seg.segs.Len() >= MaxSegments {
		return nil, reject(logpb.RejectCode_REJECT_EXHAUSTED, "%d segments already (max %d)", s.seg.segs.Len(), MaxSegments)
	}
	if ns.NumOfRows <= 0 {
		return nil, reject(logpb.RejectCode_REJECT_INVALID, "new segment %d needs rows (an empty Flushed segment is Dropped)", id)
	}
	return &Segment{ID: id, CollectionID: ns.CollectionId, PartitionID: ns.PartitionId,
		VChannel: s.st.internVChannel(ns.Vchannel), State: logpb.SegmentState_SEGMENT_FLUSHED, Level: ns.Level,
		NumRows: ns.NumOfRows, CreatedMs: s.nowMs, LastWriteMs: s.nowMs, StorageVersion: StorageV3}, nil
}

// applyCatalog applies the catalog mutation to ng (a copy of the current
// record) and stages stats and SegmentIndex changes.
func (s *publishStage) applyCatalog(ng *Segment, m *logpb.ManifestCatalogMutation, version int64) *logpb.Result {
	if m.SetNumOfRows {
		ng.NumRows = m.NumOfRows
	}
	switch m.State {
	case logpb.SegmentState_SEGMENT_UNKNOWN, ng.State:
	case logpb.SegmentState_SEGMENT_FLUSHED:
		if !allowedSegmentMoves[[2]logpb.SegmentState{ng.State, m.State}] {
			return reject(logpb.RejectCode_REJECT_INVALID, "segment %d cannot move from %s to Flushed", ng.ID, ng.State)
		}
		ng.State = m.State
	case logpb.SegmentState_SEGMENT_DROPPED:
		ng.State, ng.DroppedMs = m.State, s.nowMs
	}
	if ng.State == logpb.SegmentState_SEGMENT_FLUSHED && ng.NumRows == 0 && ng.Level != logpb.SegmentLevel_LEVEL_L0 {
		return reject(logpb.RejectCode_REJECT_INVALID, "segment %d would be Flushed with no rows", ng.ID)
	}
	if len(m.Stats) > 0 {
		var old []*logpb.ManifestStats
		if r, ok := s.mf.stats.Get(ng.ID); ok {
			old = r.Stats
		}
		s.mf.stats = s.mf.stats.Set(ng.ID, &logpb.SegmentStatsRecord{SegmentId: ng.ID, Stats: mergeStats(old, m.Stats)})
	}
	for _, r := range m.IndexUpserts {
		if old, ok := s.mf.indexes.Get(r.BuildId); ok && old.SegmentId != ng.ID {
			return reject(logpb.RejectCode_REJECT_INVALID, "index build %d belongs to segment %d, not %d", r.BuildId, old.SegmentId, ng.ID)
		}
		rec := &logpb.SegmentIndexRecord{BuildId: r.BuildId, SegmentId: ng.ID, CollectionId: ng.CollectionID,
			IndexId: r.IndexId, FieldId: r.FieldId, Files: slices.Clone(r.Files), SerializedSize: r.SerializedSize, PublishedVersion: version}
		s.mf.putIndex(rec)
	}
	for _, build := range m.IndexRemoves {
		old, ok := s.mf.indexes.Get(build)
		if !ok {
			continue // already absent: the retraction still publishes
		}
		if old.SegmentId != ng.ID {
			return reject(logpb.RejectCode_REJECT_INVALID, "index build %d belongs to segment %d, not %d", build, old.SegmentId, ng.ID)
		}
		s.mf.removeIndex(old)
	}
	return nil
}

// mergeStats returns old with every key of add replaced or added, sorted
// by key.
func mergeStats(old, add []*logpb.ManifestStats) []*logpb.ManifestStats {
	out := make([]*logpb.ManifestStats, 0, len(old)+len(add))
	for _, s := range old {
		if !slices.ContainsFunc(add, func(a *logpb.ManifestStats) bool { return a.Key == s.Key }) {
			out = append(out, s)
		}
	}
	for _, s := range add {
		out = append(out, &logpb.ManifestStats{Key: s.Key, Files: slices.Clone(s.Files)})
	}
	slices.SortFunc(out, func(a, b *logpb.ManifestStats) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// checkKeys: every object key the catalog mutation lists (stats files,
// SegmentIndex files) lies under the segment's directories, or, for an
// index file, in the index layout of its build (commands.ParseObjectKey).
func (s *publishStage) checkKeys(g *Segment, m *logpb.ManifestCatalogMutation) *logpb.Result {
	for _, st := range m.Stats {
		if err := commands.StatsKeyFiles(st.Key, st.Files, g.CollectionID, g.PartitionID, g.ID); err != nil {
			return reject(logpb.RejectCode_REJECT_INVALID, "segment %d: %v", g.ID, err)
		}
	}
	for _, r := range m.IndexUpserts {
		if err := commands.IndexKeys(r.BuildId, r.Files, g.CollectionID, g.PartitionID, g.ID); err != nil {
			return reject(logpb.RejectCode_REJECT_INVALID, "segment %d: %v", g.ID, err)
		}
	}
	return nil
}
