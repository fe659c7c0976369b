package flusher

import (
	"context"
	"fmt"
	"sort"

	"github.com/coordd/coordd/api/coordpb"
)

// Partial saves (docs/semantics.md#flusher): a growing segment's buffered
// rows are written as a binlog and recorded with SaveBinlogPaths without
// flushing once they are old enough (Config.SaveInterval) or big enough
// (Config.SaveBytes). The segment's DML position moves to the last
// consumed record, its buffer empties, and the VChannel's checkpoint —
// the earliest buffered row — moves past them: a recovery seeks later and
// the replay filter drops the saved rows (their time ticks are at or below
// the segment's DML position). Its flush then writes only the remainder.
//
// Every save says after_dml: coordd refuses (stale) a save whose binlog
// starts at or before the DML position it holds, so a partial save that
// commits after its flusher gave up on it and recovered without it cannot
// be recorded twice; the flusher then recovers again.

// rowBytes is what a buffered row counts towards Config.SaveBytes.
const rowBytes = 16

// saveDue makes a partial save of every buffered segment that is due and
// not being flushed.
func (s *session) saveDue(ctx context.Context) error {
	m := s.c.m
	if m.cfg.SaveInterval <= 0 && m.cfg.SaveBytes <= 0 {
		return nil
	}
	flushing := map[int64]bool{}
	for _, t := range s.c.currentTasks() {
		flushing[t.SegmentId] = true
	}
	now := m.cfg.Clock.Now()
	var due []*segBuf
	for id, b := range s.bufs {
		if flushing[id] || len(b.rows) == 0 {
			continue
		}
		if (m.cfg.SaveInterval > 0 && now.Sub(b.since) >= m.cfg.SaveInterval) ||
			(m.cfg.SaveBytes > 0 && int64(len(b.rows))*rowBytes >= m.cfg.SaveBytes) {
			due = append(due, b)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].id < due[j].id })
	for _, b := range due {
		if err := s.savePartial(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// savePartial writes b's rows and records them without flushing; the DML
// position is the last consumed record (at or after every buffered row,
// and before every later row: time ticks strictly increase in the WAL).
func (s *session) savePartial(ctx context.Context, b *segBuf) error {
	m := s.c.m
	nodeID, _ := m.cfg.Host.Session()
	if nodeID == 0 || s.last == nil {
		return nil
	}
	start := m.cfg.Clock.Now()
	fb, size, err := s.writeBinlog(ctx, b)
	if err != nil {
		return err
	}
	dmlPos := s.last
	req := &coordpb.SaveBinlogPathsRequest{NodeId: nodeID, Vchannel: b.vchannel, PchannelTerm: s.c.term,
		SegmentId: b.id, CollectionId: b.collection, PartitionId: b.partition, Level: "L1", AfterDml: true,
		FieldBinlogs:   []*coordpb.FieldBinlog{fb},
		StartPositions: []*coordpb.SegmentStartPosition{{SegmentId: b.id, Position: b.start}},
		Checkpoints:    []*coordpb.SegmentCheckpoint{{SegmentId: b.id, Position: dmlPos, NumOfRows: int64(len(b.rows))}}}
	resp, err := m.cfg.Coord.SaveBinlogPaths(ctx, req)
	if err != nil {
		return classed(classSave, fmt.Errorf("partial save of segment %d: %w", b.id, err))
	}
	if resp.GetStale() {
		// Flushed, dropped or overlapping rows coordd already holds: what
		// is persisted is coordd's to say; recover from it.
		return classed(classStale, fmt.Errorf("partial save of segment %d answered stale (segment %s)", b.id, resp.GetState()))
	}
	m.metrics.written(kindPartial, size, len(b.rows), m.cfg.Clock.Since(start))
	s.log.Debug("segment saved partially", "segment", b.id, "rows", len(b.rows), "dml_ts", dmlPos.Timestamp)
	delete(s.bufs, b.id)
	return nil
}

// publish updates the channel's gauges.
func (s *session) publish() {
	var rows int64
	for _, b := range s.bufs {
		rows += int64(len(b.rows))
	}
	s.c.bufferedSegs.Store(int64(len(s.bufs)))
	s.c.bufferedRows.Store(rows)
}
