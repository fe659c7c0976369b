package fsm

import (
	"fmt"

	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands/logpb"
)

// Segments and checkpoints in snapshots: one SegmentRecord per segment (by
// ID) and one ChannelCheckpointRecord per VChannel (by name), after every
// other subsystem's records. The in-memory record is a compact struct; the
// wire record is converted at the boundary.

func (s *State) segmentRecordCount() uint64 {
	return uint64(s.seg.segs.Len() + s.seg.cps.Len())
}

func (s *State) writeSegmentRecords(write func(*logpb.SnapshotRecord) error) error {
	for it := s.seg.segs.Iterator(); !it.Done(); {
		_, g, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Segment{Segment: SegmentProto(g)}}); err != nil {
			return err
		}
	}
	for it := s.seg.cps.Iterator(); !it.Done(); {
		_, cp, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_ChannelCheckpoint{ChannelCheckpoint: &logpb.ChannelCheckpointRecord{
			Vchannel: cp.VChannel, Position: positionProto(cp.Position), NodeId: cp.NodeID,
			PchannelTerm: cp.PChannelTerm, UpdatedMs: cp.UpdatedMs}}}); err != nil {
			return err
		}
	}
	return nil
}

// segmentRestorer collects segment records with builders (faster than
// one persistent insert per record) and installs them at the end.
type segmentRestorer struct {
	segs    *immutable.SortedMapBuilder[int64, *Segment]
	byChan  *immutable.SortedMapBuilder[chanSegKey, struct{}]
	byColl  *immutable.SortedMapBuilder[collSegKey, struct{}]
	cps     *immutable.SortedMapBuilder[string, *ChannelCheckpoint]
	active  *immutable.SortedMapBuilder[int64, struct{}]
	dropped *immutable.SortedMapBuilder[droppedKey, struct{}]
	counts  segmentCounts
	n       int
}

func newSegmentRestorer() *segmentRestorer {
	return &segmentRestorer{
		segs:    immutable.NewSortedMapBuilder[int64, *Segment](immutable.NewComparer[int64](0)),
		byChan:  immutable.NewSortedMapBuilder[chanSegKey, struct{}](chanSegCmp{}),
		byColl:  immutable.NewSortedMapBuilder[collSegKey, struct{}](collSegCmp{}),
		cps:     immutable.NewSortedMapBuilder[string, *ChannelCheckpoint](nil),
		active:  immutable.NewSortedMapBuilder[int64, struct{}](immutable.NewComparer[int64](0)),
		dropped: immutable.NewSortedMapBuilder[droppedKey, struct{}](droppedCmp{}),
	}
}

func (r *segmentRestorer) addSegmentRecord(s *State, g *Segment) error {
	if g == nil {
		return fmt.Errorf("segment record missing")
	}
	g.VChannel = s.internVChannel(g.VChannel)
	if _, dup := r.segs.Get(g.ID); dup || g.ID <= 0 {
		return fmt.Errorf("segment record %d is duplicated or has a bad id", g.ID)
	}
	if int(g.State) >= len(r.counts) || int(g.Level) >= len(r.counts[0]) || g.State < 0 || g.Level < 0 {
		return fmt.Errorf("segment %d has state %d level %d", g.ID, g.State, g.Level)
	}
	r.segs.Set(g.ID, g)
	r.byChan.Set(chanSegKey{g.VChannel, g.ID}, struct{}{})
	r.byColl.Set(collSegKey{g.CollectionID, g.ID}, struct{}{})
	r.counts[g.State][g.Level]++
	if isActive(g.State) {
		r.active.Set(g.ID, struct{}{})
	}
	if g.State == logpb.SegmentState_SEGMENT_DROPPED {
		r.dropped.Set(droppedKey{g.DroppedMs, g.ID}, struct{}{})
	}
	r.n++
	return nil
}

func (r *segmentRestorer) addCheckpoint(s *State, rec *logpb.ChannelCheckpointRecord) {
	r.cps.Set(rec.Vchannel, &ChannelCheckpoint{VChannel: s.internVChannel(rec.Vchannel), Position: positionOf(rec.Position),
		NodeID: rec.NodeId, PChannelTerm: rec.PchannelTerm, UpdatedMs: rec.UpdatedMs})
}

func (r *segmentRestorer) install(s *State) {
	s.seg = segmentsState{segs: r.segs.Map(), byChan: r.byChan.Map(), byColl: r.byColl.Map(), cps: r.cps.Map(), active: r.active.Map(), dropped: r.dropped.Map(), counts: r.counts}
}

// SegmentProto converts a record to its wire form.
func SegmentProto(g *Segment) *logpb.SegmentRecord {
	return &logpb.SegmentRecord{
		Id: g.ID, CollectionId: g.CollectionID, PartitionId: g.PartitionID, Vchannel: g.VChannel,
		Level: g.Level, State: g.State, NumOfRows: g.NumRows, Size: g.Size,
		StartPosition: positionProto(g.Start), DmlPosition: positionProto(g.DML),
		SealTs: g.SealTs, SealReason: g.SealReason, StorageVersion: g.StorageVersion, ManifestPath: g.ManifestPath,
		CreatedMs: g.CreatedMs, DroppedMs: g.DroppedMs, SealedMs: g.SealedMs, LastWriteMs: g.LastWriteMs,
		Binlogs: fieldLogsProto(g.Binlogs), Statslogs: fieldLogsProto(g.Statslogs), Deltalogs: logsProto(g.Deltalogs),
	}
}

func segmentOf(r *logpb.SegmentRecord) *Segment {
	g := &Segment{
		ID: r.Id, CollectionID: r.CollectionId, PartitionID: r.PartitionId, VChannel: r.Vchannel,
		Level: r.Level, State: r.State, NumRows: r.NumOfRows, Size: r.Size,
		Start: positionOf(r.StartPosition), DML: positionOf(r.DmlPosition),
		SealTs: r.SealTs, SealReason: r.SealReason, StorageVersion: r.StorageVersion, ManifestPath: r.ManifestPath,
		CreatedMs: r.CreatedMs, DroppedMs: r.DroppedMs, SealedMs: r.SealedMs, LastWriteMs: r.LastWriteMs,
		Deltalogs: logsOf(r.Deltalogs),
	}
	// Keep the stored order (already sorted by field when written).
	for _, f := range r.Binlogs {
		g.Binlogs = append(g.Binlogs, FieldLogs{FieldID: f.FieldId, Logs: logsOf(f.Logs)})
	}
	for _, f := range r.Statslogs {
		g.Statslogs = append(g.Statslogs, FieldLogs{FieldID: f.FieldId, Logs: logsOf(f.Logs)})
	}
	return g
}

func logsProto(ls []LogRef) []*logpb.LogRef {
	if len(ls) == 0 {
		return nil
	}
	out := make([]*logpb.LogRef, len(ls))
	for i, l := range ls {
		out[i] = &logpb.LogRef{LogId: l.LogID, EntriesNum: l.Entries, TimestampFrom: l.TsFrom, TimestampTo: l.TsTo, MemorySize: l.MemorySize}
	}
	return out
}

func fieldLogsProto(fs []FieldLogs) []*logpb.FieldLogs {
	if len(fs) == 0 {
		return nil
	}
	out := make([]*logpb.FieldLogs, len(fs))
	for i, f := range fs {
		out[i] = &logpb.FieldLogs{FieldId: f.FieldID, Logs: logsProto(f.Logs)}
	}
	return out
}
