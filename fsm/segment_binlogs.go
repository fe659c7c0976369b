package fsm

import (
	"math"
	"sort"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// MaxLogsPerSegmentField bounds one field's stored binlogs; a save that
// would exceed it is refused (the segment should have been sealed).
const MaxLogsPerSegmentField = 4096

func saveResult(stale bool, st logpb.SegmentState) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_SaveBinlogs{SaveBinlogs: &logpb.SaveBinlogPathsResult{Stale: stale, State: st}}}
}

// applySaveBinlogPaths records one segment's binlogs, positions and state:
//   - the caller must be the VChannel's current owner (node, PChannel term),
//     otherwise nothing changes;
//   - an unknown L0 segment is created Flushed; another unknown segment is
//     NotFound;
//   - every position and time tick must be within the bounds of
//     docs/semantics.md#position-bounds, and the row count and size sums
//     must fit an int64 (invalid);
//   - a Dropped segment, a Flushed one (unless this drops it), a DML
//     position older than the stored one or (after_dml) a new binlog that
//     starts at or before the stored DML position makes the request stale:
//     success with no write, so the flusher stops retrying;
//   - binlogs append (deduplicated by log ID) or, with_full_binlogs, replace;
//   - dropped → Dropped; flushed → Flushed, and Dropped if it holds no rows
//     and is not L0.
func applySaveBinlogPaths(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.SaveBinlogPaths)
	if err := next.CheckChannelOwner(b.Vchannel, b.NodeId, b.PchannelTerm); err != nil {
		return reject(logpb.RejectCode_REJECT_STALE, "save binlogs of segment %d: %v", b.SegmentId, err)
	}
	if r := checkSavePositions(next, b); r != nil {
		return r
	}
	g, exists := next.seg.segs.Get(b.SegmentId)
	if !exists {
		if b.Level != logpb.SegmentLevel_LEVEL_L0 {
			return reject(logpb.RejectCode_REJECT_NOT_FOUND, "segment %d does not exist", b.SegmentId)
		}
		if _, ok := next.knownVChannel(b.Vchannel); !ok {
			return reject(logpb.RejectCode_REJECT_NOT_FOUND, "vchannel %s is not a live vchannel", b.Vchannel)
		}
		if uint64(b.SegmentId) >= next.alloc.nextID {
			return reject(logpb.RejectCode_REJECT_INVALID, "L0 segment id %d was never allocated (next id %d)", b.SegmentId, next.alloc.nextID)
		}
		if next.seg.segs.Len() >= MaxSegments {
			return reject(logpb.RejectCode_REJECT_EXHAUSTED, "%d segments already (max %d)", next.seg.segs.Len(), MaxSegments)
		}
		g = &Segment{ID: b.SegmentId, CollectionID: b.CollectionId, PartitionID: b.PartitionId,
			VChannel: next.internVChannel(b.Vchannel), State: logpb.SegmentState_SEGMENT_FLUSHED,
			Level: logpb.SegmentLevel_LEVEL_L0, CreatedMs: c.ProposedAtUnixMs}
	}
	if g.CollectionID != b.CollectionId || g.VChannel != b.Vchannel || g.PartitionID != b.PartitionId {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "segment %d belongs to collection %d partition %d vchannel %s",
			g.ID, g.CollectionID, g.PartitionID, g.VChannel)
	}
	if exists && g.Level != b.Level {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "segment %d is %s, the save says %s", g.ID, g.Level, b.Level)
	}
	if g.State == logpb.SegmentState_SEGMENT_DROPPED {
		return saveResult(true, g.State)
	}
	if g.State == logpb.SegmentState_SEGMENT_IMPORTING {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "segment %d is Importing: FinishImportSegment publishes it, not a flush", g.ID)
	}
	if exists && g.State == logpb.SegmentState_SEGMENT_FLUSHED && !b.Dropped {
		return saveResult(true, g.State)
	}
	own := ownCheckpoint(b)
	if own != nil && !g.DML.IsZero() {
		p := positionOf(own.Position)
		if p.Less(g.DML) {
			return saveResult(true, g.State)
		}
		if why := movesBack(g.DML, p); why != "" {
			return reject(logpb.RejectCode_REJECT_INVALID, "save binlogs of segment %d: DML position at time tick %d: %s", g.ID, p.Timestamp, why)
		}
	}
	if b.AfterDml && !b.WithFullBinlogs && overlapsDML(g, b.Binlogs) {
		return saveResult(true, g.State)
	}
	if g.StorageVersion != 0 && b.StorageVersion != 0 && g.StorageVersion != b.StorageVersion {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "segment %d has storage version %d, the save says %d", g.ID, g.StorageVersion, b.StorageVersion)
	}
	pointer, rej := inlinePointer(next, g, b, exists)
	if rej != nil {
		return rej
	}
	if pointer == nil {
		return saveResult(true, g.State) // an older manifest pointer: stale
	}
	ng := *g
	if b.WithFullBinlogs {
		ng.Binlogs, ng.Statslogs, ng.Deltalogs = fieldLogsOf(b.Binlogs), fieldLogsOf(b.Statslogs), logsOf(b.Deltalogs)
	} else {
		ng.Binlogs = appendFieldLogs(g.Binlogs, b.Binlogs)
		ng.Statslogs = appendFieldLogs(g.Statslogs, b.Statslogs)
		ng.Deltalogs = appendLogs(g.Deltalogs, b.Deltalogs)
	}
	for _, f := range ng.Binlogs {
		if len(f.Logs) > MaxLogsPerSegmentField {
			return reject(logpb.RejectCode_REJECT_EXHAUSTED, "segment %d field %d would hold %d binlogs (max %d)",
				g.ID, f.FieldID, len(f.Logs), MaxLogsPerSegmentField)
		}
	}
	if b.StorageVersion != 0 {
		ng.StorageVersion = b.StorageVersion
	}
	ng.ManifestPath = *pointer
	if own != nil {
		ng.DML = positionOf(own.Position)
		ng.NumRows = own.NumOfRows
	}
	for _, sp := range b.StartPositions {
		if sp.SegmentId == g.ID && ng.Start.IsZero() {
			ng.Start = positionOf(sp.Position)
		}
	}
	rows, has, ok := binlogRows(ng.Binlogs)
	if !ok {
		return reject(logpb.RejectCode_REJECT_INVALID, "save binlogs of segment %d: the entries of field %d's binlogs would exceed %d rows",
			g.ID, ng.Binlogs[0].FieldID, int64(math.MaxInt64))
	}
	if has {
		ng.NumRows = rows
	}
	if ng.Size, ok = segmentSize(&ng); !ok {
		return reject(logpb.RejectCode_REJECT_INVALID, "save binlogs of segment %d: its logs' sizes would exceed %d bytes", g.ID, int64(math.MaxInt64))
	}
	ng.LastWriteMs = c.ProposedAtUnixMs
	switch {
	case b.Dropped:
		ng.State, ng.DroppedMs = logpb.SegmentState_SEGMENT_DROPPED, c.ProposedAtUnixMs
	case b.Flushed:
		ng.State = logpb.SegmentState_SEGMENT_FLUSHED
	}
	if ng.State == logpb.SegmentState_SEGMENT_FLUSHED && ng.NumRows == 0 && ng.Level != logpb.SegmentLevel_LEVEL_L0 {
		ng.State, ng.DroppedMs = logpb.SegmentState_SEGMENT_DROPPED, c.ProposedAtUnixMs
	}
	next.seg.put(&ng)
	if !exists {
		next.fenceLateSegment(&ng)
	}
	applyOtherCheckpoints(next, b, c.ProposedAtUnixMs)
	return saveResult(false, ng.State)
}

// overlapsDML reports whether a binlog in add that g does not hold yet
// starts at or before g's DML position: its rows (WAL time ticks strictly
// increase within a PChannel) were already recorded by an earlier save,
// typically a partial save whose answer the flusher never saw and which
// committed after the flusher had recovered without it.
func overlapsDML(g *Segment, add []*logpb.FieldLogs) bool {
	if g.DML.IsZero() {
		return false
	}
	have := map[int64]bool{}
	for _, f := range g.Binlogs {
		for _, l := range f.Logs {
			have[l.LogID] = true
		}
	}
	for _, f := range add {
		for _, l := range f.Logs {
			if !have[l.LogId] && l.TimestampFrom <= g.DML.Timestamp {
				return true
			}
		}
	}
	return false
}

// ownCheckpoint is the request's checkpoint of its own segment, if any.
func ownCheckpoint(b *logpb.SaveBinlogPaths) *logpb.SegmentCheckpointUpdate {
	var own *logpb.SegmentCheckpointUpdate
	for _, cp := range b.Checkpoints {
		if cp.SegmentId == b.SegmentId {
			own = cp
		}
	}
	return own
}

// applyOtherCheckpoints advances the DML and start positions of the
// VChannel's other unflushed segments the request reports (never
// backwards; unknown, foreign or finished segments are skipped).
func applyOtherCheckpoints(next *State, b *logpb.SaveBinlogPaths, nowMs int64) {
	for _, cp := range b.Checkpoints {
		if cp.SegmentId == b.SegmentId {
			continue
		}
		g, ok := next.seg.segs.Get(cp.SegmentId)
		if !ok || g.VChannel != b.Vchannel || g.State == logpb.SegmentState_SEGMENT_DROPPED || g.State == logpb.SegmentState_SEGMENT_FLUSHED ||
			g.State == logpb.SegmentState_SEGMENT_IMPORTING {
			continue
		}
		pos := positionOf(cp.Position)
		if !g.DML.IsZero() && (!g.DML.Less(pos) || movesBack(g.DML, pos) != "") {
			continue
		}
		ng := *g
		ng.DML, ng.LastWriteMs = pos, nowMs
		if _, has, _ := binlogRows(ng.Binlogs); !has {
			ng.NumRows = cp.NumOfRows
		}
		next.seg.put(&ng)
	}
	for _, sp := range b.StartPositions {
		if sp.SegmentId == b.SegmentId {
			continue
		}
		g, ok := next.seg.segs.Get(sp.SegmentId)
		if !ok || g.VChannel != b.Vchannel || !g.Start.IsZero() || !g.Healthy() {
			continue
		}
		ng := *g
		ng.Start = positionOf(sp.Position)
		next.seg.put(&ng)
	}
}

func logsOf(in []*logpb.LogRef) []LogRef {
	if len(in) == 0 {
		return nil
	}
	out := make([]LogRef, len(in))
	for i, l := range in {
		out[i] = LogRef{LogID: l.LogId, Entries: l.EntriesNum, TsFrom: l.TimestampFrom, TsTo: l.TimestampTo, MemorySize: l.MemorySize}
	}
	return out
}

// fieldLogsOf converts and sorts by field ID.
func fieldLogsOf(in []*logpb.FieldLogs) []FieldLogs {
	if len(in) == 0 {
		return nil
	}
	out := make([]FieldLogs, len(in))
	for i, f := range in {
		out[i] = FieldLogs{FieldID: f.FieldId, Logs: logsOf(f.Logs)}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FieldID < out[j].FieldID })
	return out
}

// appendLogs returns old + the new logs whose IDs old lacks (a new slice;
// old is shared with the previous record).
func appendLogs(old []LogRef, add []*logpb.LogRef) []LogRef {
	if len(add) == 0 {
		return old
	}
	have := make(map[int64]bool, len(old))
	for _, l := range old {
		have[l.LogID] = true
	}
	out := append(make([]LogRef, 0, len(old)+len(add)), old...)
	for _, l := range logsOf(add) {
		if !have[l.LogID] {
			have[l.LogID] = true
			out = append(out, l)
		}
	}
	return out
}

func appendFieldLogs(old []FieldLogs, add []*logpb.FieldLogs) []FieldLogs {
	if len(add) == 0 {
		return old
	}
	out := append(make([]FieldLogs, 0, len(old)+len(add)), old...)
	for _, f := range add {
		i := sort.Search(len(out), func(i int) bool { return out[i].FieldID >= f.FieldId })
		if i < len(out) && out[i].FieldID == f.FieldId {
			out[i] = FieldLogs{FieldID: f.FieldId, Logs: appendLogs(out[i].Logs, f.Logs)}
			continue
		}
		out = append(out, FieldLogs{})
		copy(out[i+1:], out[i:])
		out[i] = FieldLogs{FieldID: f.FieldId, Logs: logsOf(f.Logs)}
	}
	return out
}

// binlogRows sums the entries of the first field's binlogs (has=false
// without any); ok=false when the sum overflows.
func binlogRows(fs []FieldLogs) (rows int64, has, ok bool) {
	if len(fs) == 0 || len(fs[0].Logs) == 0 {
		return 0, false, true
	}
	rows, ok = sumEntries(fs[0].Logs)
	return rows, true, ok
}

func sumEntries(ls []LogRef) (int64, bool) {
	var n int64
	for _, l := range ls {
		var ok bool
		if n, ok = addCount(n, l.Entries); !ok {
			return 0, false
		}
	}
	return n, true
}

func sumSize(ls []LogRef) (int64, bool) {
	var n int64
	for _, l := range ls {
		var ok bool
		if n, ok = addCount(n, l.MemorySize); !ok {
			return 0, false
		}
	}
	return n, true
}

func logsSize(fs []FieldLogs) (int64, bool) {
	var n int64
	for _, f := range fs {
		m, ok := sumSize(f.Logs)
		if !ok {
			return 0, false
		}
		if n, ok = addCount(n, m); !ok {
			return 0, false
		}
	}
	return n, true
}

// segmentSize is the bytes of every binlog, stats log and delta log.
func segmentSize(g *Segment) (int64, bool) {
	a, ok1 := logsSize(g.Binlogs)
	b, ok2 := logsSize(g.Statslogs)
	c, ok3 := sumSize(g.Deltalogs)
	if !ok1 || !ok2 || !ok3 {
		return 0, false
	}
	ab, ok := addCount(a, b)
	if !ok {
		return 0, false
	}
	return addCount(ab, c)
}
