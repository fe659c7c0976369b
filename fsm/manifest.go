package fsm

import (
	"cmp"
	"fmt"

	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// The manifest subsystem's catalog (docs/semantics.md#manifests): a
// segment's manifest pointer is its record's ManifestPath; beside it the
// state keeps the SegmentIndex records published with manifest entries
// and each segment's catalog stats fields. Records are immutable once
// stored.
type manifestState struct {
	indexes *immutable.SortedMap[int64, *logpb.SegmentIndexRecord] // by build ID
	bySeg   *immutable.SortedMap[segBuildKey, struct{}]            // derived: (segment, build)
	stats   *immutable.SortedMap[int64, *logpb.SegmentStatsRecord] // by segment ID
	// retired, foreign and createFloor are the orphan collector's fence
	// (manifest_retire.go): watermarks by base, the derived index of
	// pointers at a base other than their segment's default, and the
	// lowest ID a manifest commit may create.
	retired     *immutable.SortedMap[string, int64]
	foreign     *immutable.SortedMap[baseSegKey, struct{}]
	createFloor int64
}

// segBuildKey orders index records by (segment, build ID).
type segBuildKey struct{ seg, build int64 }

type segBuildCmp struct{}

func (segBuildCmp) Compare(a, b segBuildKey) int {
	if c := cmp.Compare(a.seg, b.seg); c != 0 {
		return c
	}
	return cmp.Compare(a.build, b.build)
}

func newManifestState() manifestState {
	return manifestState{
		indexes: immutable.NewSortedMap[int64, *logpb.SegmentIndexRecord](immutable.NewComparer[int64](0)),
		bySeg:   immutable.NewSortedMap[segBuildKey, struct{}](segBuildCmp{}),
		stats:   immutable.NewSortedMap[int64, *logpb.SegmentStatsRecord](immutable.NewComparer[int64](0)),
		retired: newRetiredMap(),
		foreign: newForeignIndex(),
	}
}

func (m *manifestState) putIndex(r *logpb.SegmentIndexRecord) {
	m.indexes = m.indexes.Set(r.BuildId, r)
	m.bySeg = m.bySeg.Set(segBuildKey{r.SegmentId, r.BuildId}, struct{}{})
}

func (m *manifestState) removeIndex(r *logpb.SegmentIndexRecord) {
	m.indexes = m.indexes.Delete(r.BuildId)
	m.bySeg = m.bySeg.Delete(segBuildKey{r.SegmentId, r.BuildId})
}

func (m *manifestState) buildsOf(seg int64) []int64 {
	var out []int64
	it := m.bySeg.Iterator()
	it.Seek(segBuildKey{seg, 0})
	for !it.Done() {
		k, _, _ := it.Next()
		if k.seg != seg {
			break
		}
		out = append(out, k.build)
	}
	return out
}

// ---- read accessors ---------------------------------------------------------

// ManifestPointer returns a segment's published manifest pointer (the zero
// pointer when it has none) and whether the segment exists.
func (s *State) ManifestPointer(seg int64) (commands.ManifestPointer, bool, error) {
	g, ok := s.seg.segs.Get(seg)
	if !ok {
		return commands.ManifestPointer{}, false, nil
	}
	p, err := commands.ParseManifestPointer(g.ManifestPath)
	return p, true, err
}

// SegmentIndexes returns a segment's SegmentIndex records by build ID
// (shared; read only).
func (s *State) SegmentIndexes(seg int64) []*logpb.SegmentIndexRecord {
	var out []*logpb.SegmentIndexRecord
	for _, b := range s.mf.buildsOf(seg) {
		r, _ := s.mf.indexes.Get(b)
		out = append(out, r)
	}
	return out
}

// SegmentIndex looks up one SegmentIndex record by build ID.
func (s *State) SegmentIndex(build int64) (*logpb.SegmentIndexRecord, bool) {
	return s.mf.indexes.Get(build)
}

// SegmentIndexCount is the number of SegmentIndex records.
func (s *State) SegmentIndexCount() int { return s.mf.indexes.Len() }

// SegmentStats returns a segment's catalog stats fields (shared; read only).
func (s *State) SegmentStats(seg int64) []*logpb.ManifestStats {
	r, ok := s.mf.stats.Get(seg)
	if !ok {
		return nil
	}
	return r.Stats
}

// ---- snapshot ---------------------------------------------------------------

func (s *State) manifestRecordCount() uint64 {
	return uint64(s.mf.indexes.Len()+s.mf.stats.Len()) + s.retiredRecordCount()
}

func (s *State) writeManifestRecords(write func(*logpb.SnapshotRecord) error) error {
	for it := s.mf.indexes.Iterator(); !it.Done(); {
		_, r, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_SegmentIndex{SegmentIndex: r}}); err != nil {
			return err
		}
	}
	for it := s.mf.stats.Iterator(); !it.Done(); {
		_, r, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_SegmentStats{SegmentStats: r}}); err != nil {
			return err
		}
	}
	return s.writeRetiredRecords(write)
}

func (s *State) restoreSegmentIndex(r *logpb.SegmentIndexRecord) error {
	if r == nil || r.BuildId <= 0 || r.SegmentId <= 0 {
		return fmt.Errorf("segment index record without build or segment id")
	}
	if _, dup := s.mf.indexes.Get(r.BuildId); dup {
		return fmt.Errorf("segment index record %d is duplicated", r.BuildId)
	}
	s.mf.putIndex(r)
	return nil
}

func (s *State) restoreSegmentStats(r *logpb.SegmentStatsRecord) error {
	if r == nil || r.SegmentId <= 0 {
		return fmt.Errorf("segment stats record without segment id")
	}
	if _, dup := s.mf.stats.Get(r.SegmentId); dup {
		return fmt.Errorf("segment stats record %d is duplicated", r.SegmentId)
	}
	s.mf.stats = s.mf.stats.Set(r.SegmentId, r)
	return nil
}

// ---- invariants -------------------------------------------------------------

// checkManifestInvariants: every SegmentIndex and stats record belongs to
// an existing segment, the derived index is in step, and every pointer
// parses.
func (s *State) checkManifestInvariants() error {
	for it := s.mf.indexes.Iterator(); !it.Done(); {
		b, r, _ := it.Next()
		if r.BuildId != b {
			return fmt.Errorf("segment index record under build %d names build %d", b, r.BuildId)
		}
		if _, ok := s.seg.segs.Get(r.SegmentId); !ok {
			return fmt.Errorf("segment index record %d names missing segment %d", b, r.SegmentId)
		}
		if _, ok := s.mf.bySeg.Get(segBuildKey{r.SegmentId, b}); !ok {
			return fmt.Errorf("segment index record %d missing from the per-segment index", b)
		}
	}
	if s.mf.bySeg.Len() != s.mf.indexes.Len() {
		return fmt.Errorf("per-segment index holds %d entries for %d records", s.mf.bySeg.Len(), s.mf.indexes.Len())
	}
	for it := s.mf.stats.Iterator(); !it.Done(); {
		id, _, _ := it.Next()
		if _, ok := s.seg.segs.Get(id); !ok {
			return fmt.Errorf("stats record names missing segment %d", id)
		}
	}
	return s.checkRetiredInvariants()
}

// checkRetiredInvariants: every watermark's base has a publisher (a base
// without one is covered by createFloor instead, unless it names an ID not
// allocated yet), createFloor never passes the IDs ever allocated, and the
// foreign-base index lists only segments whose pointer is not at their
// default base.
func (s *State) checkRetiredInvariants() error {
	for it := s.mf.retired.Iterator(); !it.Done(); {
		base, _, _ := it.Next()
		if _, _, id, ok := parseDefaultBase(base); ok && uint64(id) >= s.alloc.nextID {
			continue
		}
		if len(s.ManifestBaseUse(base).Segments) == 0 {
			return fmt.Errorf("retired manifest base %q has no publishing segment", base)
		}
	}
	if s.mf.createFloor < 0 || uint64(s.mf.createFloor) > s.alloc.nextID {
		return fmt.Errorf("manifest creation floor %d is outside 0..%d", s.mf.createFloor, s.alloc.nextID)
	}
	for it := s.mf.foreign.Iterator(); !it.Done(); {
		k, _, _ := it.Next()
		g, ok := s.seg.segs.Get(k.seg)
		if !ok {
			return fmt.Errorf("foreign manifest base index names missing segment %d", k.seg)
		}
		if own, _ := ownManifestBase(g); own != k.base || own == commands.ManifestBase(g.CollectionID, g.PartitionID, g.ID) {
			return fmt.Errorf("foreign manifest base index lists segment %d at %q", k.seg, k.base)
		}
	}
	return nil
}

// manifestSuccessor: a segment's manifest version never goes back within
// one base path.
func manifestSuccessor(prev, next *State) error {
	for it := next.seg.segs.Iterator(); !it.Done(); {
		id, g, _ := it.Next()
		p, ok := prev.seg.segs.Get(id)
		if !ok || p == g || p.ManifestPath == g.ManifestPath || p.ManifestPath == "" {
			continue
		}
		pp, err1 := commands.ParseManifestPointer(p.ManifestPath)
		np, err2 := commands.ParseManifestPointer(g.ManifestPath)
		if err1 != nil || err2 != nil {
			continue // a legacy pointer the manifest path never accepted
		}
		if pp.Base == np.Base && np.Version < pp.Version {
			return fmt.Errorf("segment %d manifest went back from %s to %s", id, p.ManifestPath, g.ManifestPath)
		}
	}
	return nil
}
