package fsm

import (
	"cmp"
	"fmt"

	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// MaxSegments bounds the segment records one state holds (Dropped ones
// included until they are collected).
const MaxSegments = 8 << 20

// Position is a place in a PChannel's WAL: message ID (term, offset) and
// time tick. The zero Position means "none".
type Position struct {
	Term      int64
	Offset    uint64
	Timestamp uint64
}

// IsZero reports the absent position.
func (p Position) IsZero() bool { return p == Position{} }

// Less orders positions by time tick, then message ID.
func (p Position) Less(o Position) bool {
	if p.Timestamp != o.Timestamp {
		return p.Timestamp < o.Timestamp
	}
	if p.Term != o.Term {
		return p.Term < o.Term
	}
	return p.Offset < o.Offset
}

// IsDroppedSentinel: the checkpoint of a dropped VChannel.
func (p Position) IsDroppedSentinel() bool {
	return p.Timestamp == commands.DroppedTimestamp && p.Term == 0 && p.Offset == 0
}

// LogRef is one binlog object by log ID; its object key is derived
// (commands.InsertLogPath and friends).
type LogRef struct {
	LogID, Entries int64
	TsFrom, TsTo   uint64
	MemorySize     int64
}

// FieldLogs are one field's binlogs.
type FieldLogs struct {
	FieldID int64
	Logs    []LogRef
}

// Segment is one segment's record. It is compact on purpose (IDs and log
// IDs, no paths; the VChannel string is shared with the collection record)
// and immutable once stored: an update stores a modified copy.
type Segment struct {
	ID, CollectionID, PartitionID int64
	VChannel                      string
	NumRows, Size                 int64
	Start, DML                    Position
	SealTs                        uint64
	CreatedMs, SealedMs           int64
	DroppedMs, LastWriteMs        int64
	State                         logpb.SegmentState
	Level                         logpb.SegmentLevel
	SealReason                    logpb.SealReason
	StorageVersion                uint32
	ManifestPath                  string
	Binlogs, Statslogs            []FieldLogs
	Deltalogs                     []LogRef
}

// Healthy: the segment exists for readers (not Dropped).
func (g *Segment) Healthy() bool {
	return g.State != logpb.SegmentState_SEGMENT_DROPPED && g.State != logpb.SegmentState_SEGMENT_UNKNOWN
}

// InFlushState: Flushing or Flushed.
func (g *Segment) InFlushState() bool {
	return g.State == logpb.SegmentState_SEGMENT_FLUSHING || g.State == logpb.SegmentState_SEGMENT_FLUSHED
}

// BinlogFileCount is the number of insert binlogs of the first field.
func (g *Segment) BinlogFileCount() int {
	if len(g.Binlogs) == 0 {
		return 0
	}
	return len(g.Binlogs[0].Logs)
}

// InsertLogPaths lists the object keys of every insert binlog.
func (g *Segment) InsertLogPaths() []string {
	var out []string
	for _, f := range g.Binlogs {
		for _, l := range f.Logs {
			out = append(out, g.InsertLogPath(f.FieldID, l.LogID))
		}
	}
	return out
}

// InsertLogPath is the object key of insert binlog logID of field
// (commands.InsertLogPath).
func (g *Segment) InsertLogPath(field, logID int64) string {
	return commands.InsertLogPath(g.CollectionID, g.PartitionID, g.ID, field, logID)
}

// StatsLogPath is the object key of statistics log logID of field
// (commands.StatsLogPath).
func (g *Segment) StatsLogPath(field, logID int64) string {
	return commands.StatsLogPath(g.CollectionID, g.PartitionID, g.ID, field, logID)
}

// DeltaLogPath is the object key of delete log logID (commands.DeltaLogPath).
func (g *Segment) DeltaLogPath(logID int64) string {
	return commands.DeltaLogPath(g.CollectionID, g.PartitionID, g.ID, logID)
}

// ChannelCheckpoint is a VChannel's checkpoint and who wrote it.
type ChannelCheckpoint struct {
	VChannel     string
	Position     Position
	NodeID       uint64
	PChannelTerm int64
	UpdatedMs    int64
}

// Dropped reports the terminal sentinel.
func (c *ChannelCheckpoint) Dropped() bool { return c.Position.IsDroppedSentinel() }

// chanSegKey orders the per-VChannel index: (vchannel, segment ID).
type chanSegKey struct {
	vch string
	id  int64
}

type chanSegCmp struct{}

func (chanSegCmp) Compare(a, b chanSegKey) int {
	if c := cmp.Compare(a.vch, b.vch); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// collSegKey orders the per-collection index: (collection, segment ID).
type collSegKey struct{ coll, id int64 }

type collSegCmp struct{}

func (collSegCmp) Compare(a, b collSegKey) int {
	if c := cmp.Compare(a.coll, b.coll); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// segmentsState is the write-path subsystem: segments with two secondary
// indexes, VChannel checkpoints, and per state and level counters. The
// indexes and counters are derived (rebuilt on restore).
type segmentsState struct {
	segs   *immutable.SortedMap[int64, *Segment]
	byChan *immutable.SortedMap[chanSegKey, struct{}]
	byColl *immutable.SortedMap[collSegKey, struct{}]
	cps    *immutable.SortedMap[string, *ChannelCheckpoint]
	// active holds the IDs of Growing, Sealed and Flushing segments, the
	// few the leader's seal and flush checks look at every round.
	active *immutable.SortedMap[int64, struct{}]
	// dropped orders Dropped segments by drop time, for pruning.
	dropped *immutable.SortedMap[droppedKey, struct{}]
	counts  segmentCounts
}

// droppedKey orders Dropped segments: (drop time, segment ID).
type droppedKey struct{ ms, id int64 }

type droppedCmp struct{}

func (droppedCmp) Compare(a, b droppedKey) int {
	if c := cmp.Compare(a.ms, b.ms); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// segmentCounts[state][level] counts segments.
type segmentCounts [8][4]int

func newSegmentsState() segmentsState {
	return segmentsState{
		segs:    immutable.NewSortedMap[int64, *Segment](immutable.NewComparer[int64](0)),
		byChan:  immutable.NewSortedMap[chanSegKey, struct{}](chanSegCmp{}),
		byColl:  immutable.NewSortedMap[collSegKey, struct{}](collSegCmp{}),
		cps:     immutable.NewSortedMap[string, *ChannelCheckpoint](nil),
		active:  immutable.NewSortedMap[int64, struct{}](immutable.NewComparer[int64](0)),
		dropped: immutable.NewSortedMap[droppedKey, struct{}](droppedCmp{}),
	}
}

// isActive: the segment still moves through the seal/flush pipeline.
func isActive(st logpb.SegmentState) bool {
	return st == logpb.SegmentState_SEGMENT_GROWING || st == logpb.SegmentState_SEGMENT_SEALED || st == logpb.SegmentState_SEGMENT_FLUSHING
}

// put stores g, keeping indexes and counters in step.
func (d *segmentsState) put(g *Segment) {
	if old, ok := d.segs.Get(g.ID); ok {
		d.counts[old.State][old.Level]--
	} else {
		d.byChan = d.byChan.Set(chanSegKey{g.VChannel, g.ID}, struct{}{})
		d.byColl = d.byColl.Set(collSegKey{g.CollectionID, g.ID}, struct{}{})
	}
	d.counts[g.State][g.Level]++
	d.segs = d.segs.Set(g.ID, g)
	if isActive(g.State) {
		d.active = d.active.Set(g.ID, struct{}{})
	} else {
		d.active = d.active.Delete(g.ID)
	}
	if g.State == logpb.SegmentState_SEGMENT_DROPPED {
		d.dropped = d.dropped.Set(droppedKey{g.DroppedMs, g.ID}, struct{}{})
	}
}

// remove forgets a Dropped segment and its index entries.
func (d *segmentsState) remove(g *Segment) {
	d.counts[g.State][g.Level]--
	d.segs = d.segs.Delete(g.ID)
	d.byChan = d.byChan.Delete(chanSegKey{g.VChannel, g.ID})
	d.byColl = d.byColl.Delete(collSegKey{g.CollectionID, g.ID})
	d.dropped = d.dropped.Delete(droppedKey{g.DroppedMs, g.ID})
}

// OldestDroppedMs is the drop time of the oldest Dropped segment still
// kept (ok=false when there is none).
func (s *State) OldestDroppedMs() (int64, bool) {
	it := s.seg.dropped.Iterator()
	if it.Done() {
		return 0, false
	}
	k, _, _ := it.Next()
	return k.ms, true
}

// ---- read accessors ---------------------------------------------------------

// Segment looks up one segment (shared record; read only).
func (s *State) Segment(id int64) (*Segment, bool) { return s.seg.segs.Get(id) }

// SegmentCount is the number of segment records.
func (s *State) SegmentCount() int { return s.seg.segs.Len() }

// SegmentCountBy returns how many segments are in state at level.
func (s *State) SegmentCountBy(state logpb.SegmentState, level logpb.SegmentLevel) int {
	if int(state) >= len(s.seg.counts) || int(level) >= len(s.seg.counts[0]) || state < 0 || level < 0 {
		return 0
	}
	return s.seg.counts[state][level]
}

// SegmentCountIn returns how many segments are in state, at any level.
func (s *State) SegmentCountIn(state logpb.SegmentState) int {
	if int(state) >= len(s.seg.counts) || state < 0 {
		return 0
	}
	n := 0
	for _, c := range s.seg.counts[state] {
		n += c
	}
	return n
}

// EachSegment calls fn for every segment by ID until fn returns false.
func (s *State) EachSegment(fn func(*Segment) bool) {
	for it := s.seg.segs.Iterator(); !it.Done(); {
		_, g, _ := it.Next()
		if !fn(g) {
			return
		}
	}
}

// EachActiveSegment calls fn for every Growing, Sealed or Flushing segment
// by ID until fn returns false.
func (s *State) EachActiveSegment(fn func(*Segment) bool) {
	for it := s.seg.active.Iterator(); !it.Done(); {
		id, _, _ := it.Next()
		g, _ := s.seg.segs.Get(id)
		if !fn(g) {
			return
		}
	}
}

// SegmentsOfVChannel returns a VChannel's segments by ID.
func (s *State) SegmentsOfVChannel(vchannel string) []*Segment {
	var out []*Segment
	it := s.seg.byChan.Iterator()
	it.Seek(chanSegKey{vchannel, 0})
	for !it.Done() {
		k, _, _ := it.Next()
		if k.vch != vchannel {
			break
		}
		g, _ := s.seg.segs.Get(k.id)
		out = append(out, g)
	}
	return out
}

// SegmentsOfCollection returns a collection's segments by ID.
func (s *State) SegmentsOfCollection(collection int64) []*Segment {
	var out []*Segment
	it := s.seg.byColl.Iterator()
	it.Seek(collSegKey{collection, 0})
	for !it.Done() {
		k, _, _ := it.Next()
		if k.coll != collection {
			break
		}
		g, _ := s.seg.segs.Get(k.id)
		out = append(out, g)
	}
	return out
}

// ChannelCheckpoint returns a VChannel's checkpoint (shared; read only).
func (s *State) ChannelCheckpoint(vchannel string) (*ChannelCheckpoint, bool) {
	return s.seg.cps.Get(vchannel)
}

// ChannelCheckpoints returns every checkpoint by VChannel name.
func (s *State) ChannelCheckpoints() []*ChannelCheckpoint {
	out := make([]*ChannelCheckpoint, 0, s.seg.cps.Len())
	for it := s.seg.cps.Iterator(); !it.Done(); {
		_, c, _ := it.Next()
		out = append(out, c)
	}
	return out
}

// CheckChannelOwner: (node, term) must be the current assignment of
// vchannel's PChannel (ASSIGNING or ASSIGNED at exactly that term, to
// exactly that node). This is the term-based owner check of every write
// made for a VChannel (docs/semantics.md#owner-check).
func (s *State) CheckChannelOwner(vchannel string, node uint64, term int64) error {
	pname := vocab.PChannelOf(vchannel)
	p, ok := s.ch.pchannels.Get(pname)
	if !ok {
		return fmt.Errorf("pchannel %s of %s does not exist", pname, vchannel)
	}
	held := p.State == logpb.PChannelState_PCHANNEL_ASSIGNED || p.State == logpb.PChannelState_PCHANNEL_ASSIGNING
	if !held || p.NodeId != node || p.Term != term {
		return fmt.Errorf("node %d at term %d is not the owner of pchannel %s (node %d at term %d, %s)",
			node, term, pname, p.NodeId, p.Term, p.State)
	}
	return nil
}

// knownVChannel: vchannel is a live VChannel of a collection.
func (s *State) knownVChannel(vchannel string) (int64, bool) {
	coll, _, ok := s.lookupVChannel(vchannel)
	return coll, ok
}

// liveVChannel reports whether vchannel is a live VChannel of a collection
// and returns the collection record's copy of its name (see
// internVChannel).
func (s *State) liveVChannel(vchannel string) (string, bool) {
	_, name, ok := s.lookupVChannel(vchannel)
	return name, ok
}

// internVChannel returns the collection record's copy of the name, so
// every segment of a VChannel shares one string.
func (s *State) internVChannel(vchannel string) string {
	if _, name, ok := s.lookupVChannel(vchannel); ok {
		return name
	}
	return vchannel
}

// lookupVChannel finds vchannel in its collection's record: the
// collection, the record's copy of the name, and whether it is live.
func (s *State) lookupVChannel(vchannel string) (int64, string, bool) {
	coll, ok := vocab.CollectionOfVChannel(vchannel)
	if !ok {
		return 0, "", false
	}
	c, ok := s.ch.collections.Get(coll)
	if !ok {
		return 0, "", false
	}
	for _, v := range c.Vchannels {
		if v == vchannel {
			return coll, v, true
		}
	}
	return 0, "", false
}
