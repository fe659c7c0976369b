package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/objectstore"
)

// maxVersionSkips bounds how many occupied version numbers (orphans of a
// deposed leader or a crashed commit) one commit steps over.
const maxVersionSkips = 16

// prepare runs the leader-side half of one segment's commit while its lock
// is held: checks against the snapshot st (fail fast; Apply checks again),
// then the manifest I/O. It returns the publication to propose, or, for a
// Dropped segment in a batch, the answer that it was skipped.
func (c *Committer) prepare(ctx context.Context, st *fsm.State, r Request, inBatch bool) (*logpb.ManifestPublish, *coordpb.CommitSegmentManifestResponse, error) {
	req, cat := r.req, r.catalog
	id := req.SegmentId
	g, exists := st.Segment(id)
	var cur commands.ManifestPointer
	var base string
	var coll, part int64
	switch {
	case cat.GetNewSegment() != nil:
		if exists {
			p, _ := commands.ParseManifestPointer(g.ManifestPath)
			return nil, nil, &StaleError{Segment: id, Expected: 0, Current: p.Version, Why: "the new segment exists already"}
		}
		ns := cat.NewSegment
		coll, part = ns.CollectionId, ns.PartitionId
		base = commands.ManifestBase(ns.CollectionId, ns.PartitionId, id)
	case !exists:
		return nil, nil, fmt.Errorf("%w: segment %d does not exist", ErrNotFound, id)
	case !g.Healthy():
		if inBatch {
			return nil, &coordpb.CommitSegmentManifestResponse{SegmentId: id, Skipped: true}, nil
		}
		return nil, nil, fmt.Errorf("%w: segment %d is dropped", ErrNotFound, id)
	default:
		if g.StorageVersion != 0 && g.StorageVersion != fsm.StorageV3 {
			return nil, nil, invalidf("segment %d has storage version %d, manifests need %d", id, g.StorageVersion, fsm.StorageV3)
		}
		var err error
		if cur, err = commands.ParseManifestPointer(g.ManifestPath); err != nil {
			return nil, nil, invalidf("segment %d holds a pointer the manifest commit cannot read: %v", id, err)
		}
		coll, part = g.CollectionID, g.PartitionID
		base = cur.Base
		if base == "" {
			base = commands.ManifestBase(g.CollectionID, g.PartitionID, id)
		}
	}
	if err := checkMutationKeys(req, coll, part); err != nil {
		return nil, nil, err
	}
	retired := st.ManifestRetired(base)
	pub := &logpb.ManifestPublish{SegmentId: id, Base: cur.String(), Catalog: cat}
	if prep := req.Mutation.GetPublishPrepared(); prep != nil {
		next, err := c.checkPrepared(ctx, id, cur, base, prep, req.ExpectedVersion, coll, part)
		if err == nil && next != cur && next.Version <= retired {
			err = invalidf("segment %d: prepared revision %s was retired by the orphan collector (versions up to %d); write a newer one", id, next.Key(), retired)
		}
		if err != nil {
			return nil, nil, err
		}
		pub.Prepared, pub.Next = true, next.String()
		if req.ExpectedVersion != nil {
			pub.CheckExpected, pub.ExpectedVersion = true, *req.ExpectedVersion
		}
		return pub, nil, nil
	}
	next, err := c.writeNext(ctx, id, cur, base, retired, req.Mutation)
	if err != nil {
		return nil, nil, err
	}
	pub.Next = next.String()
	return pub, nil, nil
}

// checkPrepared validates a revision written elsewhere: the expected
// version, the same base, not older than the current one, and the object
// exists and is that segment's revision of that version.
func (c *Committer) checkPrepared(ctx context.Context, id int64, cur commands.ManifestPointer, base string, prep *coordpb.PublishPreparedManifest, expected *int64, coll, part int64) (commands.ManifestPointer, error) {
	if expected != nil && *expected != cur.Version {
		return commands.ManifestPointer{}, &StaleError{Segment: id, Expected: *expected, Current: cur.Version, Why: "expected manifest differs"}
	}
	if prep.BasePath != "" && prep.BasePath != base {
		return commands.ManifestPointer{}, invalidf("segment %d: prepared revision at base %q, the segment's base is %q", id, prep.BasePath, base)
	}
	next := commands.ManifestPointer{Base: base, Version: prep.Version}
	if next.Version < cur.Version {
		return commands.ManifestPointer{}, &StaleError{Segment: id, Expected: next.Version, Current: cur.Version, Why: "prepared revision is older than the published one"}
	}
	if next == cur {
		return next, nil // idempotent retry; Apply answers without change
	}
	rev, err := c.read(ctx, next)
	if err != nil {
		return commands.ManifestPointer{}, invalidf("segment %d: prepared revision %s: %v", id, next.Key(), err)
	}
	if rev.SegmentId != id || rev.Version != next.Version {
		return commands.ManifestPointer{}, invalidf("segment %d: %s holds segment %d version %d", id, next.Key(), rev.SegmentId, rev.Version)
	}
	if err := checkRevisionKeys(rev, coll, part); err != nil {
		return commands.ManifestPointer{}, invalidf("segment %d: prepared revision %s: %v", id, next.Key(), err)
	}
	return next, nil
}

// read fetches and decodes the revision p names.
func (c *Committer) read(ctx context.Context, p commands.ManifestPointer) (*coordpb.ManifestRevision, error) {
	data, err := c.cfg.Store.Get(ctx, p.Key())
	if err != nil {
		return nil, err
	}
	return Decode(data)
}

// writeNext builds the next revision from the current one and creates it
// under the first free version after cur (never overwriting an object).
func (c *Committer) writeNext(ctx context.Context, id int64, cur commands.ManifestPointer, base string, retired int64, m *coordpb.ManifestMutation) (commands.ManifestPointer, error) {
	var curRev *coordpb.ManifestRevision
	if cur.Version > 0 {
		var err error
		if curRev, err = c.read(ctx, cur); err != nil {
			return commands.ManifestPointer{}, fmt.Errorf("read the current revision of segment %d: %w", id, err)
		}
	}
	if drop := m.GetDropIndexes(); drop != nil && curRev != nil {
		if err := c.deleteIndexFiles(ctx, curRev, drop.BuildIds); err != nil {
			return commands.ManifestPointer{}, err
		}
	}
	// Versions the orphan collector retired can never be published: the
	// numbering goes on above them.
	first := max(cur.Version, retired) + 1
	for v := first; v < first+maxVersionSkips; v++ {
		rev, err := Mutate(curRev, id, v, m)
		if err != nil {
			return commands.ManifestPointer{}, fmt.Errorf("%w: segment %d: %v", commands.ErrInvalid, id, err)
		}
		data, err := Encode(rev)
		if err != nil {
			return commands.ManifestPointer{}, fmt.Errorf("%w: segment %d: %v", commands.ErrInvalid, id, err)
		}
		next := commands.ManifestPointer{Base: base, Version: v}
		err = c.cfg.Store.Create(ctx, next.Key(), data)
		if errors.Is(err, objectstore.ErrExists) {
			continue // an orphan holds this number; never overwrite it
		}
		if err != nil {
			return commands.ManifestPointer{}, fmt.Errorf("write revision %s: %w", next.Key(), err)
		}
		return next, nil
	}
	return commands.ManifestPointer{}, fmt.Errorf("segment %d: versions %d..%d are all taken by unpublished revisions; run the orphan collector",
		id, first, first+maxVersionSkips-1)
}

// deleteIndexFiles removes the files of the retracted index entries before
// the revision without them is committed: metadata is never retired
// before the bytes (a crash in between leaves entries whose files are
// gone, and the retraction is simply run again).
func (c *Committer) deleteIndexFiles(ctx context.Context, rev *coordpb.ManifestRevision, builds []int64) error {
	for _, ix := range rev.Indexes {
		if !slices.Contains(builds, ix.BuildId) {
			continue
		}
		for _, f := range ix.Files {
			if err := objectstore.ValidateKey(f); err != nil {
				continue // not an object key of this store
			}
			if err := c.cfg.Store.Delete(ctx, f); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
				return fmt.Errorf("delete index file %s of build %d: %w", f, ix.BuildId, err)
			}
		}
	}
	return nil
}
