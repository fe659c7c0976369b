package flusher

import (
	"context"
	"fmt"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/binlog"
)

// pendingTasks reports whether coordd asked for a flush this session has
// not done yet; it forgets done segments coordd no longer lists.
func (s *session) pendingTasks() bool {
	tasks := s.c.currentTasks()
	listed := make(map[int64]bool, len(tasks))
	pending := 0
	for _, t := range tasks {
		listed[t.SegmentId] = true
		if !s.done[t.SegmentId] {
			pending++
		}
	}
	for id := range s.done {
		if !listed[id] {
			delete(s.done, id)
			delete(s.snap, id)
			delete(s.seen, id)
		}
	}
	s.c.pendingTasks.Store(int64(pending))
	return pending > 0
}

// flushReady flushes every task whose rows are all consumed. coordd asks
// for a flush only after the segment's allocations expired, so every row
// of it is in the WAL before the offset the WAL had reached when the task
// was first seen here.
func (s *session) flushReady(ctx context.Context) error {
	m := s.c.m
	for _, t := range s.c.currentTasks() {
		if s.done[t.SegmentId] {
			continue
		}
		end, ok := s.snap[t.SegmentId]
		if !ok {
			var err error
			if end, err = m.cfg.Host.WALEnd(s.c.pchannel, s.c.term); err != nil {
				return classed(classWAL, fmt.Errorf("wal end: %w", err))
			}
			s.snap[t.SegmentId] = end
			s.seen[t.SegmentId] = m.cfg.Clock.Now()
		}
		if s.next < end {
			continue
		}
		if err := s.flushSegment(ctx, t); err != nil {
			return err
		}
		s.done[t.SegmentId] = true
		m.metrics.flushLatency.Observe(m.cfg.Clock.Since(s.seen[t.SegmentId]).Seconds())
	}
	return nil
}

// writeBinlog writes b's buffered rows as one binlog object and returns
// its entry for SaveBinlogPaths and its size. An object whose save is
// never recorded (the flusher failed or gave up first) is garbage no
// segment names.
func (s *session) writeBinlog(ctx context.Context, b *segBuf) (*coordpb.FieldBinlog, int, error) {
	m := s.c.m
	first, _, err := m.cfg.Coord.AllocID(ctx, 1)
	if err != nil {
		return nil, 0, classed(classAllocID, fmt.Errorf("allocate a log id: %w", err))
	}
	obj := &binlog.Object{ID: binlog.ID{Collection: b.collection, Partition: b.partition, Segment: b.id,
		Field: binlog.PKFieldID, LogID: int64(first)}, Rows: b.rows}
	data, err := binlog.Encode(obj)
	if err != nil {
		return nil, 0, err
	}
	if err := m.cfg.Store.Put(ctx, obj.ID.Path(), data); err != nil {
		return nil, 0, classed(classObjectStore, fmt.Errorf("write binlog of segment %d: %w", b.id, err))
	}
	from, to := obj.TimestampRange()
	return &coordpb.FieldBinlog{FieldId: binlog.PKFieldID, Binlogs: []*coordpb.Binlog{{
		LogId: int64(first), EntriesNum: int64(len(b.rows)), TimestampFrom: from, TimestampTo: to, MemorySize: int64(len(data))}}}, len(data), nil
}

// flushSegment writes the segment's buffered rows (those not in a partial
// save yet) as one binlog object and records it with SaveBinlogPaths
// (flushed). A segment without rows is saved empty, which drops it unless
// partial saves recorded rows for it.
func (s *session) flushSegment(ctx context.Context, t *coordpb.FlushTask) error {
	m := s.c.m
	nodeID, _ := m.cfg.Host.Session()
	if nodeID == 0 {
		return fmt.Errorf("not registered")
	}
	start := m.cfg.Clock.Now()
	b := s.bufs[t.SegmentId]
	level := t.Level
	if level == "" {
		level = "L1"
	}
	dmlPos := s.last
	if dmlPos == nil || s.tick > dmlPos.Timestamp && b == nil {
		dmlPos = &coordpb.Position{Term: s.c.term, Offset: s.next, Timestamp: s.tick}
	}
	req := &coordpb.SaveBinlogPathsRequest{NodeId: nodeID, Vchannel: t.Vchannel, PchannelTerm: s.c.term,
		SegmentId: t.SegmentId, CollectionId: t.CollectionId, PartitionId: t.PartitionId, Level: level, Flushed: true,
		AfterDml: true}
	rows, size := 0, 0
	if b != nil && len(b.rows) > 0 {
		fb, n, err := s.writeBinlog(ctx, b)
		if err != nil {
			return err
		}
		rows, size = len(b.rows), n
		req.CollectionId, req.PartitionId, req.Vchannel = b.collection, b.partition, b.vchannel
		req.FieldBinlogs = []*coordpb.FieldBinlog{fb}
		req.StartPositions = []*coordpb.SegmentStartPosition{{SegmentId: b.id, Position: b.start}}
	}
	req.Checkpoints = []*coordpb.SegmentCheckpoint{{SegmentId: t.SegmentId, Position: dmlPos, NumOfRows: int64(rows)}}
	resp, err := m.cfg.Coord.SaveBinlogPaths(ctx, req)
	if err != nil {
		// The rows stay buffered (the checkpoint stays before them); the
		// session starts over and tries again.
		return classed(classSave, fmt.Errorf("save binlogs of segment %d: %w", t.SegmentId, err))
	}
	if resp.GetStale() && !finished(resp.GetState()) {
		// The segment is still open but coordd holds rows this save
		// overlaps (a save it recorded after this session recovered):
		// recover again, which filters them.
		return classed(classStale, fmt.Errorf("flush of segment %d answered stale while it is %s", t.SegmentId, resp.GetState()))
	}
	delete(s.bufs, t.SegmentId)
	if rows > 0 && !resp.GetStale() {
		m.metrics.written(kindFlush, size, rows, m.cfg.Clock.Since(start))
	}
	s.log.Info("segment flushed", "segment", t.SegmentId, "vchannel", t.Vchannel, "rows", rows,
		"state", resp.GetState(), "stale", resp.GetStale(), "dml_ts", dmlPos.Timestamp)
	return nil
}

// finished: a segment state no save changes any more.
func finished(state string) bool { return state == "Flushed" || state == "Dropped" }
