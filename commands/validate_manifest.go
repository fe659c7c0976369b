package commands

import (
	"strings"
	"unicode/utf8"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Shape limits for manifest commands.
const (
	// MaxManifestPublishes bounds the segments of one manifest commit.
	MaxManifestPublishes = 1024
	// MaxManifestStats bounds the stats keys of one catalog mutation.
	MaxManifestStats = 256
	// MaxManifestFiles bounds the files listed under one key or index.
	MaxManifestFiles = 4096
	// MaxManifestIndexMutations bounds the index records one publication
	// upserts or removes.
	MaxManifestIndexMutations = 256
	// MaxManifestFileBytes bounds one listed object key.
	MaxManifestFileBytes = 1024
)

// validateManifestCommand covers the 0x0400 block; ok=false means body is
// not a manifest command.
func validateManifestCommand(body any) (err error, ok bool) {
	if r, isRetire := body.(*logpb.RetireManifestRevisions); isRetire {
		return validateRetireManifestRevisions(r), true
	}
	b, isManifest := body.(*logpb.CommitSegmentManifests)
	if !isManifest {
		return nil, false
	}
	n := len(b.Publishes)
	if n == 0 || n > MaxManifestPublishes {
		return invalid("a manifest commit publishes 1..%d segments, got %d", MaxManifestPublishes, n), true
	}
	seen := make(map[int64]bool, n)
	for _, p := range b.Publishes {
		if seen[p.SegmentId] {
			return invalid("segment %d is published twice in one commit", p.SegmentId), true
		}
		seen[p.SegmentId] = true
		if err := ValidateManifestPublish(p); err != nil {
			return err, true
		}
	}
	return nil, true
}

// ValidateManifestPublish checks one publication's shape: its pointers,
// then its catalog mutation (ValidateManifestCatalog). The request rules
// of Milvus's commit framework (no new segment or SegmentIndex change in a
// batch, at most one upsert, upserts and removals not mixed, each matched
// by the manifest mutation) are the API's (controller/manifest.NewRequest);
// nothing here depends on them for the state to stay consistent.
func ValidateManifestPublish(p *logpb.ManifestPublish) error {
	if err := validateManifestPointers(p); err != nil {
		return err
	}
	return ValidateManifestCatalog(p.SegmentId, p.Catalog)
}

// validateManifestPointers checks a publication's segment ID, its base and
// next pointers and the flags that go with them.
func validateManifestPointers(p *logpb.ManifestPublish) error {
	if p == nil || p.SegmentId <= 0 {
		return invalid("a manifest publication needs a positive segment id")
	}
	base, err := ParseManifestPointer(p.Base)
	if err != nil {
		return err
	}
	next, err := ParseManifestPointer(p.Next)
	if err != nil {
		return err
	}
	if next.Version < 1 {
		return invalid("segment %d: the published revision needs a version of at least 1", p.SegmentId)
	}
	if next.String() != p.Next || base.String() != p.Base {
		return invalid("segment %d: manifest pointers must be in canonical form", p.SegmentId)
	}
	if p.CheckExpected && !p.Prepared {
		return invalid("segment %d: an expected manifest is allowed only when publishing a prepared revision", p.SegmentId)
	}
	if !p.Prepared {
		if !base.IsZero() && (base.Base != next.Base || next.Version <= base.Version) {
			return invalid("segment %d: next revision %s does not follow %s", p.SegmentId, p.Next, p.Base)
		}
	}
	return nil
}

// ValidateManifestCatalog checks the catalog mutation a publication of
// segment seg carries (nil: none). It stands alone so that a request is
// checked before its revision, and so its pointer, exists.
func ValidateManifestCatalog(seg int64, m *logpb.ManifestCatalogMutation) error {
	if m == nil {
		return nil
	}
	switch m.State {
	case logpb.SegmentState_SEGMENT_UNKNOWN, logpb.SegmentState_SEGMENT_FLUSHED, logpb.SegmentState_SEGMENT_DROPPED:
	default:
		return invalid("segment %d: a catalog mutation may set state Flushed or Dropped, not %s", seg, m.State)
	}
	if m.SetNumOfRows && m.NumOfRows < 0 {
		return invalid("segment %d: row count %d is negative", seg, m.NumOfRows)
	}
	if len(m.Stats) > MaxManifestStats {
		return invalid("segment %d: %d stats keys (max %d)", seg, len(m.Stats), MaxManifestStats)
	}
	keys := map[string]bool{}
	for _, s := range m.Stats {
		if err := ValidateManifestStats(s); err != nil {
			return err
		}
		if keys[s.Key] {
			return invalid("segment %d: stats key %q twice", seg, s.Key)
		}
		keys[s.Key] = true
	}
	if err := validateIndexMutations(seg, m); err != nil {
		return err
	}
	if ns := m.NewSegment; ns != nil {
		if err := validateSegmentChannel(ns.CollectionId, ns.Vchannel); err != nil {
			return err
		}
		if ns.PartitionId < 0 || ns.NumOfRows < 0 {
			return invalid("segment %d: partition id and row count must not be negative", seg)
		}
		if ns.Level != logpb.SegmentLevel_LEVEL_L1 && ns.Level != logpb.SegmentLevel_LEVEL_L2 {
			return invalid("segment %d: a new segment is L1 or L2, not %s", seg, ns.Level)
		}
	}
	return nil
}

func validateIndexMutations(seg int64, m *logpb.ManifestCatalogMutation) error {
	if len(m.IndexUpserts) > MaxManifestIndexMutations || len(m.IndexRemoves) > MaxManifestIndexMutations {
		return invalid("segment %d: %d SegmentIndex upserts and %d removals (max %d each)", seg, len(m.IndexUpserts), len(m.IndexRemoves), MaxManifestIndexMutations)
	}
	seen := map[int64]bool{}
	for _, r := range m.IndexUpserts {
		if r.BuildId <= 0 || r.SegmentId != seg || r.IndexId <= 0 || r.FieldId < 0 || seen[r.BuildId] {
			return invalid("segment %d: a SegmentIndex upsert needs a distinct build id, an index id and this segment id", seg)
		}
		seen[r.BuildId] = true
		if err := validateFiles(r.Files); err != nil {
			return err
		}
	}
	for _, id := range m.IndexRemoves {
		if id <= 0 || seen[id] {
			return invalid("segment %d: SegmentIndex changes need distinct positive build ids", seg)
		}
		seen[id] = true
	}
	return nil
}

// ValidateManifestStats checks one stats key and its files.
func ValidateManifestStats(s *logpb.ManifestStats) error {
	if s == nil {
		return invalid("a stats entry is missing")
	}
	if err := ValidateStatsKey(s.Key); err != nil {
		return err
	}
	return validateFiles(s.Files)
}

func validateFiles(files []string) error {
	if len(files) > MaxManifestFiles {
		return invalid("%d files (max %d)", len(files), MaxManifestFiles)
	}
	for _, f := range files {
		if _, err := ParseObjectKey(f); err != nil {
			return err
		}
	}
	return nil
}

// MaxManifestRetirements bounds the bases one RetireManifestRevisions
// condemns.
const MaxManifestRetirements = 1024

func validateRetireManifestRevisions(b *logpb.RetireManifestRevisions) error {
	n := len(b.Retirements)
	if n == 0 || n > MaxManifestRetirements {
		return invalid("a retirement names 1..%d bases, got %d", MaxManifestRetirements, n)
	}
	seen := make(map[string]bool, n)
	for _, r := range b.Retirements {
		if err := ValidateManifestBase(r.Base); err != nil {
			return err
		}
		if !strings.HasPrefix(r.Base, ManifestRoot) {
			return invalid("the collector retires only revisions under %s, not %q", ManifestRoot, r.Base)
		}
		if seen[r.Base] {
			return invalid("base %q is retired twice in one command", r.Base)
		}
		seen[r.Base] = true
		if r.From < 1 || r.Through < r.From {
			return invalid("base %q: retired versions %d..%d are not a range of positive versions", r.Base, r.From, r.Through)
		}
	}
	return nil
}

// MaxStatsKeyBytes bounds a stats key's name, in a catalog mutation and
// in every revision the leader writes (a revision carries its stats keys
// for the rest of the segment's life).
const MaxStatsKeyBytes = 256

// ValidateStatsKey checks a stats key's name (a catalog key such as
// "bloom_filter" or "text:101", not an object key): 1..MaxStatsKeyBytes
// bytes of valid UTF-8 without control or invisible characters
// (vocab.IsInvisible) or backslashes, not absolute, and no empty, "." or
// ".." element if it has slashes.
func ValidateStatsKey(key string) error {
	if key == "" || len(key) > MaxStatsKeyBytes {
		return invalid("a stats key must be 1..%d bytes, got %d", MaxStatsKeyBytes, len(key))
	}
	if !utf8.ValidString(key) {
		return invalid("stats key %q is not valid UTF-8", key)
	}
	for _, c := range key {
		if c == '\\' || vocab.IsInvisible(c) {
			return invalid("stats key %q contains a control or invisible character or a backslash (%U)", key, c)
		}
	}
	for e := range strings.SplitSeq(key, "/") {
		if !cleanElem(e) {
			return invalid("stats key %q is absolute or has an empty, '.' or '..' element", key)
		}
	}
	return nil
}
