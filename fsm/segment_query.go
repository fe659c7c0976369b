package fsm

import (
	"fmt"
	"sort"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// tsLogicalBits: a TSO timestamp is physical milliseconds << 18 | logical.
const tsLogicalBits = 18

// PhysicalMs is the wall-clock part of a TSO timestamp.
func PhysicalMs(ts uint64) int64 { return int64(ts >> tsLogicalBits) }

// ComposeTS builds the smallest TSO timestamp of a wall-clock millisecond.
func ComposeTS(ms int64) uint64 { return uint64(ms) << tsLogicalBits }

// ErrUnknownVChannel: a VChannel no collection has (and never had).
var ErrUnknownVChannel = fmt.Errorf("unknown vchannel")

// RecoveryInfo is what a new owner of a VChannel needs
// (docs/semantics.md#recovery).
type RecoveryInfo struct {
	CollectionID int64
	VChannel     string
	// Seek is where to start reading (zero: from the beginning).
	Seek Position
	// Dropped: the VChannel was dropped; do not recover it.
	Dropped                                 bool
	Unflushed, Flushed, DroppedSegments, L0 []*Segment
}

// RecoveryInfo classifies a VChannel's segments for its flusher:
// importing segments and finished segments without any position are
// skipped; then Dropped → dropped, L0 → L0, Flushed → flushed, the rest
// (Growing, Sealed, Flushing) → unflushed: a Flushing segment is not
// persisted yet, so its new owner must rebuild and flush it. The seek
// position is the channel checkpoint (every VChannel a CreateCollection
// broadcast made has one from its creation), else the earliest DML (or
// start) position of a segment, else the beginning (zero). An unflushed
// segment without any position may hold rows coordd has no position for
// (buffered, never saved), and they may be before every known position:
// then the seek is the beginning too.
func (s *State) RecoveryInfo(vchannel string) (RecoveryInfo, error) {
	cp, hasCP := s.seg.cps.Get(vchannel)
	coll, live := s.knownVChannel(vchannel)
	if !live && !hasCP {
		return RecoveryInfo{}, fmt.Errorf("%w: %s", ErrUnknownVChannel, vchannel)
	}
	if !live {
		coll, _ = vocab.CollectionOfVChannel(vchannel)
	}
	out := RecoveryInfo{CollectionID: coll, VChannel: vchannel}
	if hasCP && cp.Dropped() {
		out.Dropped, out.Seek = true, cp.Position
		return out, nil
	}
	var earliest Position
	unpositioned := false
	for _, g := range s.SegmentsOfVChannel(vchannel) {
		if g.State == logpb.SegmentState_SEGMENT_IMPORTING {
			continue
		}
		unflushed := g.State == logpb.SegmentState_SEGMENT_GROWING || g.State == logpb.SegmentState_SEGMENT_SEALED ||
			g.State == logpb.SegmentState_SEGMENT_FLUSHING
		if !unflushed && g.Start.IsZero() && g.DML.IsZero() {
			continue
		}
		switch {
		case g.State == logpb.SegmentState_SEGMENT_DROPPED:
			out.DroppedSegments = append(out.DroppedSegments, g)
			continue
		case g.Level == logpb.SegmentLevel_LEVEL_L0:
			out.L0 = append(out.L0, g)
		case g.State == logpb.SegmentState_SEGMENT_FLUSHED:
			out.Flushed = append(out.Flushed, g)
		default:
			out.Unflushed = append(out.Unflushed, g)
		}
		p := g.DML
		if p.IsZero() {
			p = g.Start
		}
		unpositioned = unpositioned || (unflushed && p.IsZero())
		if !p.IsZero() && (earliest.IsZero() || p.Less(earliest)) {
			earliest = p
		}
	}
	switch {
	case hasCP:
		out.Seek = cp.Position
	case !unpositioned:
		out.Seek = earliest
	}
	return out, nil
}

// FlushLag names one thing that is not flushed yet.
type FlushLag struct {
	Kind                   string // "segment" or "vchannel"
	SegmentID              int64
	VChannel               string
	State                  string
	CheckpointTs, TargetTs uint64
	LagMs                  int64
}

// FlushStatus answers GetFlushState / GetFlushAllState.
type FlushStatus struct {
	Flushed                          bool
	Behind                           []FlushLag
	SegmentsTotal, SegmentsFlushed   int
	VChannelsTotal, VChannelsFlushed int
}

// MaxFlushLags bounds the lags one answer lists.
const MaxFlushLags = 64

// FlushState: true once every listed segment is Flushed, Dropped or gone
// and every VChannel of the collection has a checkpoint at or past flushTs.
func (s *State) FlushState(segmentIDs []int64, flushTs uint64, collection int64) FlushStatus {
	var st FlushStatus
	for _, id := range segmentIDs {
		st.SegmentsTotal++
		g, ok := s.seg.segs.Get(id)
		if !ok || !g.Healthy() || g.State == logpb.SegmentState_SEGMENT_FLUSHED {
			st.SegmentsFlushed++
			continue
		}
		lag := FlushLag{Kind: "segment", SegmentID: id, VChannel: g.VChannel, State: SegmentStateName(g.State), TargetTs: flushTs}
		if cp, ok := s.seg.cps.Get(g.VChannel); ok {
			lag.CheckpointTs = cp.Position.Timestamp
		}
		lag.LagMs = lagMs(lag.CheckpointTs, flushTs)
		st.Behind = append(st.Behind, lag)
	}
	if c, ok := s.ch.collections.Get(collection); ok {
		for _, v := range c.Vchannels {
			s.checkVChannelFlushed(&st, v, flushTs)
		}
	}
	return finishFlushStatus(st)
}

// FlushAllState: every VChannel of every collection must have a checkpoint
// at or past the FlushAll time tick of its PChannel (perPChannel), or past
// legacyTs when perPChannel is empty.
func (s *State) FlushAllState(perPChannel map[string]uint64, legacyTs uint64) (FlushStatus, error) {
	if len(perPChannel) == 0 && legacyTs == 0 {
		return FlushStatus{}, fmt.Errorf("flush-all timestamps are missing")
	}
	var st FlushStatus
	for it := s.ch.collections.Iterator(); !it.Done(); {
		_, c, _ := it.Next()
		for _, v := range c.Vchannels {
			ts := legacyTs
			if len(perPChannel) > 0 {
				t, ok := perPChannel[vocab.PChannelOf(v)]
				if !ok || t == 0 {
					return FlushStatus{}, fmt.Errorf("no flush-all timestamp for pchannel %s", vocab.PChannelOf(v))
				}
				ts = t
			}
			s.checkVChannelFlushed(&st, v, ts)
		}
	}
	return finishFlushStatus(st), nil
}

func (s *State) checkVChannelFlushed(st *FlushStatus, v string, target uint64) {
	st.VChannelsTotal++
	cp, ok := s.seg.cps.Get(v)
	if ok && cp.Position.Timestamp >= target {
		st.VChannelsFlushed++
		return
	}
	lag := FlushLag{Kind: "vchannel", VChannel: v, State: "none", TargetTs: target}
	if ok {
		lag.State, lag.CheckpointTs = "behind", cp.Position.Timestamp
	}
	lag.LagMs = lagMs(lag.CheckpointTs, target)
	st.Behind = append(st.Behind, lag)
}

func finishFlushStatus(st FlushStatus) FlushStatus {
	st.Flushed = len(st.Behind) == 0
	sort.SliceStable(st.Behind, func(i, j int) bool { return st.Behind[i].LagMs > st.Behind[j].LagMs })
	if len(st.Behind) > MaxFlushLags {
		st.Behind = st.Behind[:MaxFlushLags]
	}
	return st
}

// lagMs is the physical distance from cp to target (target's physical time
// when there is no checkpoint at all).
func lagMs(cp, target uint64) int64 {
	if cp >= target {
		return 0
	}
	return PhysicalMs(target) - PhysicalMs(cp)
}

// SegmentStateName is the API spelling of a state.
func SegmentStateName(st logpb.SegmentState) string {
	switch st {
	case logpb.SegmentState_SEGMENT_GROWING:
		return "Growing"
	case logpb.SegmentState_SEGMENT_SEALED:
		return "Sealed"
	case logpb.SegmentState_SEGMENT_FLUSHING:
		return "Flushing"
	case logpb.SegmentState_SEGMENT_FLUSHED:
		return "Flushed"
	case logpb.SegmentState_SEGMENT_DROPPED:
		return "Dropped"
	case logpb.SegmentState_SEGMENT_IMPORTING:
		return "Importing"
	}
	return "Unknown"
}

// SegmentStateByName parses the API spelling (ok=false when unknown).
func SegmentStateByName(name string) (logpb.SegmentState, bool) {
	for st := logpb.SegmentState_SEGMENT_GROWING; st <= logpb.SegmentState_SEGMENT_IMPORTING; st++ {
		if SegmentStateName(st) == name {
			return st, true
		}
	}
	return 0, false
}

// SegmentLevelName is the API spelling of a level.
func SegmentLevelName(l logpb.SegmentLevel) string {
	switch l {
	case logpb.SegmentLevel_LEVEL_L0:
		return "L0"
	case logpb.SegmentLevel_LEVEL_L1:
		return "L1"
	case logpb.SegmentLevel_LEVEL_L2:
		return "L2"
	}
	return "Unknown"
}

// SealReasonName is the API spelling of a seal reason.
func SealReasonName(r logpb.SealReason) string {
	switch r {
	case logpb.SealReason_SEAL_FLUSH:
		return "flush"
	case logpb.SealReason_SEAL_CAPACITY:
		return "capacity"
	case logpb.SealReason_SEAL_LIFETIME:
		return "lifetime"
	case logpb.SealReason_SEAL_IDLE:
		return "idle"
	case logpb.SealReason_SEAL_BINLOG_NUMBER:
		return "binlog_number"
	case logpb.SealReason_SEAL_GROWING_BYTES:
		return "growing_bytes"
	}
	return ""
}

// SegmentFilter selects segments for ListSegments (zero fields match all).
type SegmentFilter struct {
	CollectionID int64
	VChannel     string
	State        logpb.SegmentState
	// After: only IDs above it (paging).
	After int64
}

func (f SegmentFilter) match(g *Segment) bool {
	return g.ID > f.After && (f.CollectionID == 0 || g.CollectionID == f.CollectionID) &&
		(f.VChannel == "" || g.VChannel == f.VChannel) && (f.State == 0 || g.State == f.State)
}

// ListSegments returns up to limit matching segments by ID, and whether
// more match. It walks the narrowest index the filter allows.
func (s *State) ListSegments(f SegmentFilter, limit int) (out []*Segment, more bool) {
	visit := func(g *Segment) bool {
		if !f.match(g) {
			return true
		}
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, g)
		return true
	}
	switch {
	case f.VChannel != "":
		it := s.seg.byChan.Iterator()
		it.Seek(chanSegKey{f.VChannel, f.After + 1})
		for !it.Done() {
			k, _, _ := it.Next()
			if k.vch != f.VChannel {
				break
			}
			if g, _ := s.seg.segs.Get(k.id); !visit(g) {
				break
			}
		}
	case f.CollectionID != 0:
		it := s.seg.byColl.Iterator()
		it.Seek(collSegKey{f.CollectionID, f.After + 1})
		for !it.Done() {
			k, _, _ := it.Next()
			if k.coll != f.CollectionID {
				break
			}
			if g, _ := s.seg.segs.Get(k.id); !visit(g) {
				break
			}
		}
	default:
		it := s.seg.segs.Iterator()
		it.Seek(f.After + 1)
		for !it.Done() {
			_, g, _ := it.Next()
			if !visit(g) {
				break
			}
		}
	}
	return out, more
}
