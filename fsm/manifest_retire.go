package fsm

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// Retired manifest revisions (docs/semantics.md#manifest-orphans). The
// orphan collector never deletes a revision before a committed
// RetireManifestRevisions has made it unpublishable, so no pointer can
// ever name a deleted object:
//
//   - the publishers of a base are the segments whose own base it is
//     (ownManifestBase: the pointer's base once set, else the default
//     manifest/<collection>/<partition>/<segment>);
//   - a base some segment publishes keeps a watermark in `retired`: no
//     publication may move a pointer there to a version at or below it;
//   - a base no segment publishes needs no watermark: the only segment
//     that could ever publish there is the one its path names, and
//     `createFloor` rises above that ID, so a manifest commit can no longer
//     create it (a late L0 save that creates it gets its base fenced
//     completely, fenceLateSegment);
//   - when the last publisher of a base with a watermark is pruned, the
//     watermark is folded into createFloor the same way.
//
// So the state is bounded: one watermark per base a live segment
// publishes, and one number.

// baseSegKey orders (base, segment) pairs.
type baseSegKey struct {
	base string
	seg  int64
}

type baseSegCmp struct{}

func (baseSegCmp) Compare(a, b baseSegKey) int {
	if c := strings.Compare(a.base, b.base); c != 0 {
		return c
	}
	return cmp.Compare(a.seg, b.seg)
}

func newRetiredMap() *immutable.SortedMap[string, int64] {
	return immutable.NewSortedMap[string, int64](nil)
}

func newForeignIndex() *immutable.SortedMap[baseSegKey, struct{}] {
	return immutable.NewSortedMap[baseSegKey, struct{}](baseSegCmp{})
}

// ownManifestBase is the base a segment's revisions may be published at:
// its pointer's base once it has one, else the default. ok=false for a
// pointer that does not parse (never accepted by any write path).
func ownManifestBase(g *Segment) (string, bool) {
	def := commands.ManifestBase(g.CollectionID, g.PartitionID, g.ID)
	if g.ManifestPath == "" || strings.HasSuffix(g.ManifestPath, `"base_path":"`+def+`"}`) {
		return def, true
	}
	p, err := commands.ParseManifestPointer(g.ManifestPath)
	if err != nil {
		return "", false
	}
	return p.Base, true
}

// parseDefaultBase splits a default base path into its IDs.
func parseDefaultBase(base string) (coll, part, seg int64, ok bool) {
	rest, found := strings.CutPrefix(base, commands.ManifestRoot)
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	var ids [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != p {
			return 0, 0, 0, false
		}
		ids[i] = n
	}
	return ids[0], ids[1], ids[2], ids[2] > 0
}

// ManifestBaseUse is what the replicated state says about one base path.
type ManifestBaseUse struct {
	// Segments publish at this base (sorted).
	Segments []int64
	// Published is the highest version any of them points at (0: none).
	Published int64
	// Importing: one of them is Importing; its job may still publish any
	// version.
	Importing bool
	// Retired is the watermark: no pointer may move to a version at or
	// below it here.
	Retired int64
}

// ManifestBaseUse attributes a base path by the pointers in the state,
// never by parsing a segment ID out of the path alone.
func (s *State) ManifestBaseUse(base string) ManifestBaseUse {
	var u ManifestBaseUse
	add := func(g *Segment) {
		u.Segments = append(u.Segments, g.ID)
		if g.State == logpb.SegmentState_SEGMENT_IMPORTING {
			u.Importing = true
		}
		if p, err := commands.ParseManifestPointer(g.ManifestPath); err == nil && p.Base == base && p.Version > u.Published {
			u.Published = p.Version
		}
	}
	var owner int64
	if _, _, id, ok := parseDefaultBase(base); ok {
		if g, exists := s.seg.segs.Get(id); exists {
			if own, ok := ownManifestBase(g); ok && own == base {
				owner = id
				add(g)
			}
		}
	}
	it := s.mf.foreign.Iterator()
	it.Seek(baseSegKey{base, math.MinInt64})
	for !it.Done() {
		k, _, _ := it.Next()
		if k.base != base {
			break
		}
		if g, ok := s.seg.segs.Get(k.seg); ok && k.seg != owner {
			add(g)
		}
	}
	u.Retired, _ = s.mf.retired.Get(base)
	return u
}

// ManifestCreateFloor: a manifest commit may not create a segment with a
// lower ID (its base may have been collected).
func (s *State) ManifestCreateFloor() int64 { return s.mf.createFloor }

// RetiredManifestCount is the number of bases with a retirement watermark.
func (s *State) RetiredManifestCount() int { return s.mf.retired.Len() }

// applyRetireManifestRevisions records the collector's decision per base
// (the decision-term fence ran before). An entry is kept, with nothing
// changed for it, when an Importing segment publishes at the base, when
// some pointer there reaches `from`, or when the base names a segment ID
// that was never allocated. Otherwise its versions from..through are
// retired: the watermark rises to `through`, or, for a base no segment
// publishes, createFloor rises above the segment ID it names.
func applyRetireManifestRevisions(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.RetireManifestRevisions)
	out := &logpb.ManifestRetireResult{}
	mf := next.mf
	for _, r := range b.Retirements {
		why := next.retirable(r)
		out.Retired = append(out.Retired, why == "")
		out.Reasons = append(out.Reasons, why)
		if why != "" {
			continue
		}
		if len(next.ManifestBaseUse(r.Base).Segments) > 0 {
			if w, _ := mf.retired.Get(r.Base); r.Through > w {
				mf.retired = mf.retired.Set(r.Base, r.Through)
			}
		} else if _, _, id, ok := parseDefaultBase(r.Base); ok && id+1 > mf.createFloor {
			mf.createFloor = id + 1
		}
	}
	next.mf = mf
	return &logpb.Result{Value: &logpb.Result_ManifestRetired{ManifestRetired: out}}
}

// retirable is "" when r may be retired, else why not.
func (s *State) retirable(r *logpb.ManifestRetirement) string {
	u := s.ManifestBaseUse(r.Base)
	switch {
	case u.Importing:
		return "an Importing segment publishes at this base"
	case u.Published >= r.From:
		return fmt.Sprintf("version %d is published at this base", u.Published)
	case len(u.Segments) == 0:
		if _, _, id, ok := parseDefaultBase(r.Base); ok && uint64(id) >= s.alloc.nextID {
			return fmt.Sprintf("segment id %d was never allocated", id)
		}
	}
	return ""
}

// checkPublication is the rule every publication path shares (inline
// save, import finish, manifest commit): the pointer moves to next at the
// segment's own base, and not to a retired version. named: the caller
// names a revision written elsewhere (a retired one is gone: invalid);
// otherwise the leader wrote it just now (stale: it retries above the
// watermark).
func (s *State) checkPublication(g *Segment, cur, next commands.ManifestPointer, named bool) *logpb.Result {
	own, ok := ownManifestBase(g)
	if !ok {
		return reject(logpb.RejectCode_REJECT_INVALID, "segment %d holds a pointer that does not parse", g.ID)
	}
	if next.Base != own {
		return reject(logpb.RejectCode_REJECT_INVALID, "segment %d: manifest base %q, the segment's is %q", g.ID, next.Base, own)
	}
	if next == cur {
		return nil
	}
	if next.Version == 0 {
		// Version 0 means "no revision yet": never a revision to publish
		// (and nothing the collector retired, whatever its watermark).
		return reject(logpb.RejectCode_REJECT_INVALID, "segment %d: manifest pointer version 0 names no revision; publish version 1 or higher", g.ID)
	}
	if w, _ := s.mf.retired.Get(own); next.Version <= w {
		if named {
			return reject(logpb.RejectCode_REJECT_INVALID, "segment %d: revision %s was retired by the orphan collector (versions up to %d at this base); write a newer one",
				g.ID, next.Key(), w)
		}
		return staleManifest(g.ID, cur.Version, cur.Version, fmt.Sprintf("version %d was retired by the orphan collector", next.Version))
	}
	return nil
}

// checkCreatable refuses to create segment id with a manifest when its
// base may have been collected.
func (s *State) checkCreatable(id int64) *logpb.Result {
	if id < s.mf.createFloor {
		return reject(logpb.RejectCode_REJECT_INVALID, "segment id %d is below the manifest creation floor %d: the orphan collector may have removed revisions of its base; allocate a new id",
			id, s.mf.createFloor)
	}
	return nil
}

// fenceLateSegment: a segment a save creates (an L0 segment first seen
// by its save) below createFloor may never publish a manifest, since its
// base may have been collected before it existed.
func (next *State) fenceLateSegment(g *Segment) {
	if g.ID < next.mf.createFloor {
		next.mf.retired = next.mf.retired.Set(commands.ManifestBase(g.CollectionID, g.PartitionID, g.ID), math.MaxInt64)
	}
}

// forgetManifestRecords drops every manifest record of a pruned segment
// (already removed from next.seg): its SegmentIndex and stats records,
// its entry in the foreign-base index, and the watermark of a base it was
// the last publisher of, folded into createFloor.
func (next *State) forgetManifestRecords(g *Segment) {
	mf := next.mf
	for _, build := range mf.buildsOf(g.ID) {
		r, _ := mf.indexes.Get(build)
		mf.removeIndex(r)
	}
	mf.stats = mf.stats.Delete(g.ID)
	own, ok := ownManifestBase(g)
	if ok {
		mf.foreign = mf.foreign.Delete(baseSegKey{own, g.ID})
	}
	next.mf = mf
	if !ok {
		return
	}
	if _, has := next.mf.retired.Get(own); !has || len(next.ManifestBaseUse(own).Segments) > 0 {
		return
	}
	floor := g.ID + 1
	if _, _, id, ok := parseDefaultBase(own); ok {
		if uint64(id) >= next.alloc.nextID {
			// A legacy pointer at the base of an ID not allocated yet: the
			// floor cannot pass it, so the watermark stays.
			next.mf.createFloor = max(next.mf.createFloor, floor)
			return
		}
		floor = max(floor, id+1)
	}
	next.mf.retired = next.mf.retired.Delete(own)
	next.mf.createFloor = max(next.mf.createFloor, floor)
}

// rebuildForeignIndex indexes the segments whose pointer names a base
// other than their default one. No write path creates such a pointer any
// more (checkPublication), so only a restored state can hold them.
func (s *State) rebuildForeignIndex() {
	idx := immutable.NewSortedMapBuilder[baseSegKey, struct{}](baseSegCmp{})
	for it := s.seg.segs.Iterator(); !it.Done(); {
		_, g, _ := it.Next()
		if g.ManifestPath == "" {
			continue
		}
		if own, ok := ownManifestBase(g); ok && own != commands.ManifestBase(g.CollectionID, g.PartitionID, g.ID) {
			idx.Set(baseSegKey{own, g.ID}, struct{}{})
		}
	}
	s.mf.foreign = idx.Map()
}

// ---- snapshot ---------------------------------------------------------------

func (s *State) retiredRecordCount() uint64 {
	n := uint64(s.mf.retired.Len())
	if s.mf.createFloor != 0 {
		n++
	}
	return n
}

func (s *State) writeRetiredRecords(write func(*logpb.SnapshotRecord) error) error {
	if s.mf.createFloor != 0 {
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_ManifestMeta{ManifestMeta: &logpb.ManifestMeta{CreateFloor: s.mf.createFloor}}}); err != nil {
			return err
		}
	}
	for it := s.mf.retired.Iterator(); !it.Done(); {
		base, w, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_ManifestRetired{ManifestRetired: &logpb.ManifestRetiredRecord{Base: base, Through: w}}}); err != nil {
			return err
		}
	}
	return nil
}

// readRetiredRecord restores one record of writeRetiredRecords (ok=false:
// not one of them).
func (s *State) readRetiredRecord(rec *logpb.SnapshotRecord) (bool, error) {
	switch v := rec.Record.(type) {
	case *logpb.SnapshotRecord_ManifestMeta:
		if v.ManifestMeta.CreateFloor <= 0 {
			return true, fmt.Errorf("manifest meta with creation floor %d", v.ManifestMeta.CreateFloor)
		}
		s.mf.createFloor = v.ManifestMeta.CreateFloor
		return true, nil
	case *logpb.SnapshotRecord_ManifestRetired:
		r := v.ManifestRetired
		if err := commands.ValidateManifestBase(r.Base); err != nil || r.Through <= 0 {
			return true, fmt.Errorf("retired manifest record %q through %d", r.Base, r.Through)
		}
		if _, dup := s.mf.retired.Get(r.Base); dup {
			return true, fmt.Errorf("retired manifest record %q is duplicated", r.Base)
		}
		s.mf.retired = s.mf.retired.Set(r.Base, r.Through)
		return true, nil
	}
	return false, nil
}

// ManifestRetired is the retirement watermark of a base (0: none).
func (s *State) ManifestRetired(base string) int64 {
	w, _ := s.mf.retired.Get(base)
	return w
}
