package manifest

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/objectstore"
)

// GCReport is what one orphan collection pass found.
type GCReport struct {
	// Found: orphans past the grace period; Removed: those deleted.
	Found, Removed []string
	// Young: orphans still inside the grace period (kept).
	Young int
}

// CollectOrphans runs one pass (docs/semantics.md#manifest-orphans): it
// lists every revision under commands.ManifestRoot and deletes those no
// pointer references — a version above the segment's published one at
// that base, or any version of a segment that no longer exists — once
// they are older than the grace period. Each segment's candidates are
// re-checked against the current state under the segment's lock, so a
// commit of this leader in flight (which holds the lock from the write to
// the applied command) is never raced; a deposed leader's late commit is
// refused by the decision-term fence, so its revisions are orphans too.
// Nothing at or below a published version is ever deleted.
func (c *Committer) CollectOrphans(ctx context.Context, dryRun bool) (GCReport, error) {
	var rep GCReport
	if c.cfg.Store == nil {
		return rep, ErrNoStore
	}
	if c.leader.EstablishedTerm() == 0 {
		return rep, leadership.ErrNotEstablished
	}
	objs, err := c.cfg.Store.ListInfo(ctx, commands.ManifestRoot)
	if err != nil {
		return rep, fmt.Errorf("list manifest revisions: %w", err)
	}
	now := c.clock.Now()
	type cand struct {
		key     string
		base    string
		version int64
	}
	bySeg := map[int64][]cand{}
	for _, o := range objs {
		base, v, ok := commands.ParseManifestKey(o.Key)
		if !ok {
			continue
		}
		seg, ok := commands.SegmentOfManifestBase(base)
		if !ok || v <= publishedAt(c, seg, base) {
			continue
		}
		if now.Sub(o.ModTime) < c.cfg.GCGrace {
			rep.Young++
			continue
		}
		bySeg[seg] = append(bySeg[seg], cand{o.Key, base, v})
	}
	segs := make([]int64, 0, len(bySeg))
	for s := range bySeg {
		segs = append(segs, s)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })
	for _, seg := range segs {
		if !c.locks.tryLock(seg) {
			continue // a commit is in flight: next pass
		}
		err := func() error {
			defer c.locks.unlock(seg)
			for _, cd := range bySeg[seg] {
				if cd.version <= publishedAt(c, seg, cd.base) { // re-read under the lock
					continue
				}
				rep.Found = append(rep.Found, cd.key)
				if dryRun {
					continue
				}
				if err := c.cfg.Store.Delete(ctx, cd.key); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
					return fmt.Errorf("delete orphan %s: %w", cd.key, err)
				}
				rep.Removed = append(rep.Removed, cd.key)
			}
			return nil
		}()
		if err != nil {
			c.cfg.Metrics.orphans(len(rep.Found), len(rep.Removed))
			return rep, err
		}
	}
	c.cfg.Metrics.orphans(len(rep.Found), len(rep.Removed))
	return rep, nil
}

// publishedAt is the version a segment's pointer references at base in
// the current state (0: none — the segment is gone or points elsewhere).
// An Importing segment's revisions belong to the import job still writing
// them, which publishes one inline when it finishes
// (docs/semantics.md#import-segments): none is an orphan before then.
func publishedAt(c *Committer, seg int64, base string) int64 {
	st := c.leader.State()
	if g, ok := st.Segment(seg); ok && g.State == logpb.SegmentState_SEGMENT_IMPORTING {
		return 1<<63 - 1
	}
	p, ok, err := st.ManifestPointer(seg)
	if !ok || err != nil || p.Base != base {
		if err != nil {
			return 1<<63 - 1 // unreadable pointer: never delete anything of it
		}
		return 0
	}
	return p.Version
}

// RunGC is the collector's leader routine: one pass every GCInterval until
// ctx ends.
func (c *Committer) RunGC(ctx context.Context, term uint64) {
	if c.cfg.Store == nil {
		return
	}
	t := c.clock.NewTicker(c.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		rep, err := c.CollectOrphans(ctx, false)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("manifest orphan collection failed", "term", term, "error", err)
		} else if len(rep.Removed) > 0 {
			c.log.Info("manifest orphans removed", "term", term, "removed", len(rep.Removed), "young", rep.Young)
		}
	}
}
