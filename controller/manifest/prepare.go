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
	"github.com/coordd/coordd/vocab"
)

// maxVersionSkips bounds how many occupied version numbers (orphans of a
// deposed leader or a crashed commit) one commit steps over.
const maxVersionSkips = 16

// prepare runs the leader-side half of one segment's commit while its lock
// is held: checks against the snapshot st (fail fast; Apply checks again),
// then the manifest I/O. b says what to build on: the segment's pending
// tail (pipelining: its pointer and content stand for the applied
// record's, docs/semantics.md#manifest-pipelining) or the applied state,
// with the current content when a tail caches it. It returns the
// publication to propose and the tail it makes (nil: none new), or, for a
// Dropped segment in a batch, the answer that it was skipped.
func (c *Committer) prepare(ctx context.Context, st *fsm.State, r Request, inBatch bool, b basis) (*logpb.ManifestPublish, *tail, *coordpb.CommitSegmentManifestResponse, error) {
	req, cat := r.req, r.catalog
	id := req.SegmentId
	g, exists := st.Segment(id)
	var cur commands.ManifestPointer
	var curRev *coordpb.ManifestRevision // nil: read it from the store
	var base string
	var coll, part int64
	switch {
	case cat.GetNewSegment() != nil:
		if b.onTail {
			return nil, nil, nil, &StaleError{Segment: id, Expected: 0, Current: b.tail.ptr.Version, Why: "the new segment exists already (a commit on it is in flight)"}
		}
		if exists {
			p, _ := commands.ParseManifestPointer(g.ManifestPath)
			return nil, nil, nil, &StaleError{Segment: id, Expected: 0, Current: p.Version, Why: "the new segment exists already"}
		}
		ns := cat.NewSegment
		coll, part = ns.CollectionId, ns.PartitionId
		base = commands.ManifestBase(ns.CollectionId, ns.PartitionId, id)
	case !exists && !b.onTail:
		return nil, nil, nil, vocab.Errorf(ErrNotFound, "segment %d does not exist", id)
	case exists && !g.Healthy():
		if inBatch {
			return nil, nil, &coordpb.CommitSegmentManifestResponse{SegmentId: id, Skipped: true}, nil
		}
		return nil, nil, nil, vocab.Errorf(ErrNotFound, "segment %d is dropped", id)
	case exists && g.StorageVersion != 0 && g.StorageVersion != fsm.StorageV3:
		return nil, nil, nil, invalidf("segment %d has storage version %d, manifests need %d", id, g.StorageVersion, fsm.StorageV3)
	case b.onTail:
		// The tail's publication is queued before this one (log order =
		// lock order): if it applies, the pointer is the tail's when
		// this one is applied. A segment the tail creates is not in st yet.
		cur, curRev, coll, part, base = b.tail.ptr, b.tail.rev, b.tail.coll, b.tail.part, b.tail.ptr.Base
	default:
		var err error
		if cur, err = commands.ParseManifestPointer(g.ManifestPath); err != nil {
			return nil, nil, nil, invalidf("segment %d holds a pointer the manifest commit cannot read: %w", id, err)
		}
		coll, part = g.CollectionID, g.PartitionID
		base = cur.Base
		if base == "" {
			base = commands.ManifestBase(g.CollectionID, g.PartitionID, id)
		}
		if b.tail != nil && b.tail.ptr == cur {
			curRev = b.tail.rev // the cached content of the published revision
		}
	}
	if err := checkMutationKeys(req, coll, part); err != nil {
		return nil, nil, nil, err
	}
	retired := st.ManifestRetired(base)
	pub := &logpb.ManifestPublish{SegmentId: id, Base: cur.String(), Catalog: cat}
	if prep := req.Mutation.GetPublishPrepared(); prep != nil {
		next, rev, err := c.checkPrepared(ctx, id, cur, base, prep, req.ExpectedVersion, coll, part)
		if err == nil && next != cur && next.Version <= retired {
			err = invalidf("segment %d: prepared revision %s was retired by the orphan collector (versions up to %d); write a newer one", id, next.Key(), retired)
		}
		if err != nil {
			return nil, nil, nil, err
		}
		pub.Prepared, pub.Next = true, next.String()
		if req.ExpectedVersion != nil {
			pub.CheckExpected, pub.ExpectedVersion = true, *req.ExpectedVersion
		}
		var nt *tail
		if next != cur {
			nt = &tail{ptr: next, rev: rev, coll: coll, part: part}
		}
		return pub, nt, nil, nil
	}
	top := int64(0)
	if b.base == base {
		top = b.top
	}
	next, rev, err := c.writeNext(ctx, id, cur, curRev, base, max(retired, top), req.Mutation)
	if err != nil {
		return nil, nil, nil, err
	}
	c.tails.wrote(id, base, next.Version)
	pub.Next = next.String()
	return pub, &tail{ptr: next, rev: rev, coll: coll, part: part}, nil, nil
}

// checkPrepared validates a revision written elsewhere: the expected
// version, the same base, not older than the current one, and the object
// exists and is that segment's revision of that version.
func (c *Committer) checkPrepared(ctx context.Context, id int64, cur commands.ManifestPointer, base string, prep *coordpb.PublishPreparedManifest, expected *int64, coll, part int64) (commands.ManifestPointer, *coordpb.ManifestRevision, error) {
	var none commands.ManifestPointer
	if expected != nil && *expected != cur.Version {
		return none, nil, &StaleError{Segment: id, Expected: *expected, Current: cur.Version, Why: "expected manifest differs"}
	}
	if prep.BasePath != "" && prep.BasePath != base {
		return none, nil, invalidf("segment %d: prepared revision at base %q, the segment's base is %q", id, prep.BasePath, base)
	}
	next := commands.ManifestPointer{Base: base, Version: prep.Version}
	if next.Version < cur.Version {
		return none, nil, &StaleError{Segment: id, Expected: next.Version, Current: cur.Version, Why: "prepared revision is older than the published one"}
	}
	if next == cur {
		return next, nil, nil // idempotent retry; Apply answers without change
	}
	rev, err := c.read(ctx, next)
	if err != nil {
		return none, nil, invalidf("segment %d: prepared revision %s: %v", id, next.Key(), err)
	}
	if rev.SegmentId != id || rev.Version != next.Version {
		return none, nil, invalidf("segment %d: %s holds segment %d version %d", id, next.Key(), rev.SegmentId, rev.Version)
	}
	if err := checkRevisionKeys(rev, coll, part); err != nil {
		return none, nil, invalidf("segment %d: prepared revision %s: %v", id, next.Key(), err)
	}
	return next, rev, nil
}

// read fetches and decodes the revision p names.
func (c *Committer) read(ctx context.Context, p commands.ManifestPointer) (*coordpb.ManifestRevision, error) {
	data, err := c.cfg.Store.Get(ctx, p.Key())
	if err != nil {
		return nil, err
	}
	return Decode(data)
}

// writeNext builds the next revision from the current one (curRev: its
// content when known, else read from the store) and creates it under the
// first free version above cur and floor (never overwriting an object).
// It returns the revision exactly as stored.
func (c *Committer) writeNext(ctx context.Context, id int64, cur commands.ManifestPointer, curRev *coordpb.ManifestRevision, base string, floor int64, m *coordpb.ManifestMutation) (commands.ManifestPointer, *coordpb.ManifestRevision, error) {
	var none commands.ManifestPointer
	if cur.Version > 0 && curRev == nil {
		var err error
		if curRev, err = c.read(ctx, cur); err != nil {
			return none, nil, fmt.Errorf("read the current revision of segment %d: %w", id, err)
		}
	}
	if drop := m.GetDropIndexes(); drop != nil && curRev != nil {
		if err := c.deleteIndexFiles(ctx, curRev, drop.BuildIds); err != nil {
			return none, nil, err
		}
	}
	// Versions the orphan collector retired can never be published: the
	// numbering goes on above them. So it does above the versions this
	// leader wrote already (the floor's other part), which are in flight
	// or orphans of refused attempts.
	first := max(cur.Version, floor) + 1
	for v := first; v < first+maxVersionSkips; v++ {
		rev, err := Mutate(curRev, id, v, m)
		if err != nil {
			return none, nil, vocab.Errorf(commands.ErrInvalid, "segment %d: %w", id, err)
		}
		data, err := Encode(rev)
		if err != nil {
			return none, nil, vocab.Errorf(commands.ErrInvalid, "segment %d: %w", id, err)
		}
		next := commands.ManifestPointer{Base: base, Version: v}
		err = c.cfg.Store.Create(ctx, next.Key(), data)
		if errors.Is(err, objectstore.ErrExists) {
			continue // an orphan holds this number; never overwrite it
		}
		if err != nil {
			return none, nil, fmt.Errorf("write revision %s: %w", next.Key(), err)
		}
		return next, rev, nil
	}
	return none, nil, fmt.Errorf("segment %d: versions %d..%d are all taken by unpublished revisions; run the orphan collector",
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
