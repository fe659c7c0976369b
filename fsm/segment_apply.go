package fsm

import (
	"math"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// Segment lifecycle (docs/semantics.md#segment-states):
// Growing → Sealed (SealSegments) → Flushing (MarkSegmentsFlushing) →
// Flushed or Dropped (SaveBinlogPaths); unknown L0 → Flushed (SaveBinlogPaths).

func segmentIDs(ids []int64) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_Segments{Segments: &logpb.SegmentIDList{Ids: ids}}}
}

// applyCreateSegment creates a Growing L1 segment for the VChannel's current
// owner. Its ID comes from the global ID space.
func applyCreateSegment(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.CreateSegment)
	return createOwnedSegment(next, c, "create segment", b.NodeId, b.PchannelTerm, Segment{
		CollectionID: b.CollectionId, PartitionID: b.PartitionId, VChannel: b.Vchannel,
		State: logpb.SegmentState_SEGMENT_GROWING, Level: logpb.SegmentLevel_LEVEL_L1,
	})
}

// createOwnedSegment is the creation every segment-creating command shares:
// seg.VChannel must be a known VChannel whose current owner is (node, term),
// and the segment cap and the global ID space must have room. seg gets the
// next global ID, its VChannel interned and the proposal time as creation
// and last-write time.
func createOwnedSegment(next *State, c commands.Command, what string, node uint64, term int64, seg Segment) *logpb.Result {
	if _, ok := next.knownVChannel(seg.VChannel); !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "vchannel %s is not a vchannel of collection %d", seg.VChannel, seg.CollectionID)
	}
	if err := next.CheckChannelOwner(seg.VChannel, node, term); err != nil {
		return reject(logpb.RejectCode_REJECT_STALE, "%s: %v", what, err)
	}
	if next.seg.segs.Len() >= MaxSegments {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "%d segments already (max %d)", next.seg.segs.Len(), MaxSegments)
	}
	if next.alloc.nextID >= math.MaxInt64 {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "id space exhausted for segments: next %d", next.alloc.nextID)
	}
	seg.ID = int64(next.alloc.nextID)
	next.alloc.nextID++
	seg.VChannel = next.internVChannel(seg.VChannel)
	seg.CreatedMs, seg.LastWriteMs = c.ProposedAtUnixMs, c.ProposedAtUnixMs
	next.seg.put(&seg)
	return segmentIDs([]int64{seg.ID})
}

// checkDecisionTerm: a leader routine's decision is valid only in the term
// it was made in.
func checkDecisionTerm(next *State, t commands.Type, term uint64) *logpb.Result {
	if term != next.leader.term {
		return reject(logpb.RejectCode_REJECT_STALE, "%s was decided in term %d, the established term is %d", t, term, next.leader.term)
	}
	return nil
}

// applySealSegments seals Growing segments at seal_ts: the listed ones and
// every Growing segment of collection_id. Segments past Growing are left
// as they are (sealing is idempotent); an unknown listed ID rejects the
// whole command. The result lists the segments sealed by this command.
func applySealSegments(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.SealSegments)
	if r := checkDecisionTerm(next, c.Type, b.DecisionTerm); r != nil {
		return r
	}
	targets := make([]*Segment, 0, len(b.SegmentIds))
	for _, id := range b.SegmentIds {
		g, ok := next.seg.segs.Get(id)
		if !ok {
			return reject(logpb.RejectCode_REJECT_NOT_FOUND, "segment %d does not exist", id)
		}
		targets = append(targets, g)
	}
	if b.CollectionId > 0 {
		targets = append(targets, next.SegmentsOfCollection(b.CollectionId)...)
	}
	sealed := []int64{}
	for _, g := range targets {
		if g.State != logpb.SegmentState_SEGMENT_GROWING {
			continue
		}
		ng := *g
		ng.State = logpb.SegmentState_SEGMENT_SEALED
		ng.SealTs, ng.SealReason, ng.SealedMs = b.SealTs, b.Reason, c.ProposedAtUnixMs
		next.seg.put(&ng)
		sealed = append(sealed, g.ID)
	}
	return segmentIDs(sealed)
}

// applyMarkSegmentsFlushing moves Sealed segments to Flushing (the leader
// then tells the owning flusher); others are skipped.
func applyMarkSegmentsFlushing(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.MarkSegmentsFlushing)
	if r := checkDecisionTerm(next, c.Type, b.DecisionTerm); r != nil {
		return r
	}
	marked := []int64{}
	for _, id := range b.SegmentIds {
		g, ok := next.seg.segs.Get(id)
		if !ok || g.State != logpb.SegmentState_SEGMENT_SEALED {
			continue
		}
		ng := *g
		ng.State = logpb.SegmentState_SEGMENT_FLUSHING
		next.seg.put(&ng)
		marked = append(marked, id)
	}
	return segmentIDs(marked)
}

// applyUpdateChannelCheckpoints advances checkpoints: each entry must come
// from the owner, name a live VChannel, be within the position bounds
// (docs/semantics.md#position-bounds) and be newer than the stored one
// (by time tick, and not at a lower offset in the same term); the dropped
// sentinel is terminal. Refused entries are listed.
func applyUpdateChannelCheckpoints(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.UpdateChannelCheckpoints)
	out := &logpb.CheckpointsResult{}
	for _, u := range b.Checkpoints {
		pos := positionOf(u.Position)
		old, had := next.seg.cps.Get(u.Vchannel)
		var name string // the collection record's copy of the name
		switch {
		case had && old.Dropped():
			out.Refused = append(out.Refused, u.Vchannel+": vchannel is dropped")
			continue
		case had:
			// A stored checkpoint other than the dropped sentinel names a
			// live VChannel (CheckInvariants), and holds its interned name:
			// the collection lookup is skipped, the apply's hottest step
			// at 65,536 VChannels (docs/scaling.md#milvus-max).
			name = old.VChannel
		default:
			live, ok := next.liveVChannel(u.Vchannel)
			if !ok {
				out.Refused = append(out.Refused, u.Vchannel+": not a live vchannel")
				continue
			}
			name = live
		}
		if err := next.CheckChannelOwner(u.Vchannel, b.NodeId, u.PchannelTerm); err != nil {
			out.Refused = append(out.Refused, u.Vchannel+": "+err.Error())
			continue
		}
		if err := next.checkPosition("checkpoint", u.Vchannel, pos); err != nil {
			out.Refused = append(out.Refused, u.Vchannel+": "+err.Error())
			continue
		}
		if had && !old.Position.Less(pos) {
			out.Refused = append(out.Refused, u.Vchannel+": not newer than the stored checkpoint")
			continue
		}
		if had {
			if why := movesBack(old.Position, pos); why != "" {
				out.Refused = append(out.Refused, u.Vchannel+": checkpoint "+why)
				continue
			}
		}
		next.seg.cps = next.seg.cps.Set(name, &ChannelCheckpoint{VChannel: name,
			Position: pos, NodeID: b.NodeId, PChannelTerm: u.PchannelTerm, UpdatedMs: c.ProposedAtUnixMs})
		out.Accepted++
	}
	return &logpb.Result{Value: &logpb.Result_Checkpoints{Checkpoints: out}}
}

// dropCollectionSegments drops every segment of a dropped collection and
// sets the dropped sentinel on its VChannels (called when its VChannels are
// dropped).
func dropCollectionSegments(next *State, coll *logpb.CollectionVChannels, atMs int64) {
	for _, g := range next.SegmentsOfCollection(coll.CollectionId) {
		if g.State == logpb.SegmentState_SEGMENT_DROPPED {
			continue
		}
		ng := *g
		ng.State, ng.DroppedMs = logpb.SegmentState_SEGMENT_DROPPED, atMs
		next.seg.put(&ng)
	}
	for _, v := range coll.Vchannels {
		next.seg.cps = next.seg.cps.Set(v, &ChannelCheckpoint{VChannel: v,
			Position: Position{Timestamp: commands.DroppedTimestamp}, UpdatedMs: atMs})
	}
}

func positionOf(p *logpb.WALPosition) Position {
	return Position{Term: p.GetTerm(), Offset: p.GetOffset(), Timestamp: p.GetTimestamp()}
}

func positionProto(p Position) *logpb.WALPosition {
	if p.IsZero() {
		return nil
	}
	return &logpb.WALPosition{Term: p.Term, Offset: p.Offset, Timestamp: p.Timestamp}
}

// applyPruneDroppedSegments forgets, oldest first, up to max_count
// segments Dropped at least retention_ms before the command's time whose
// rows no recovery can replay any more (PrunableDropped). A Dropped
// segment that is still needed stays listed in RecoveryInfo, so the
// replay filter keeps discarding its inserts.
func applyPruneDroppedSegments(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.PruneDroppedSegments)
	if r := checkDecisionTerm(next, c.Type, b.DecisionTerm); r != nil {
		return r
	}
	pruned := next.PrunableDropped(c.ProposedAtUnixMs-b.RetentionMs, int(b.MaxCount))
	for _, id := range pruned {
		g, _ := next.seg.segs.Get(id)
		next.seg.remove(g)
		next.forgetManifestRecords(g)
	}
	return segmentIDs(pruned)
}

// MaxPruneScan bounds the Dropped segments one prune decision examines, so
// a VChannel whose checkpoint is stuck behind many of them costs a bounded
// scan per round.
const MaxPruneScan = 1 << 16

// PrunableDropped lists, oldest drop first, up to max Dropped segments
// dropped at or before cutoffMs that recovery no longer needs
// (prunableDropped), examining at most MaxPruneScan candidates. Apply and
// the leader's decision to propose a prune use it alike.
func (s *State) PrunableDropped(cutoffMs int64, max int) []int64 {
	var out []int64
	scanned := 0
	for it := s.seg.dropped.Iterator(); !it.Done() && len(out) < max && scanned < MaxPruneScan; scanned++ {
		k, _, _ := it.Next()
		if k.ms > cutoffMs {
			break
		}
		if g, _ := s.seg.segs.Get(k.id); s.prunableDropped(g) {
			out = append(out, k.id)
		}
	}
	return out
}

// prunableDropped: every insert of g that a recovery could read is below
// its VChannel's checkpoint, so the replay filter drops it by the seek
// floor and g need not be listed as dropped any more (as Milvus's garbage
// collector: the channel checkpoint must be after the segment's DML
// position). That holds when the VChannel is dropped; when g's DML
// position (else its start position) is below the checkpoint's time tick;
// and, for a segment the WAL never named (no position: it reported no
// row), once the checkpoint's physical time is past the drop. Without a
// checkpoint nothing is prunable.
func (s *State) prunableDropped(g *Segment) bool {
	cp, ok := s.seg.cps.Get(g.VChannel)
	if !ok {
		return false
	}
	if cp.Dropped() {
		return true
	}
	p := g.DML
	if p.IsZero() {
		p = g.Start
	}
	if p.IsZero() {
		return PhysicalMs(cp.Position.Timestamp) > g.DroppedMs
	}
	return p.Timestamp < cp.Position.Timestamp
}
