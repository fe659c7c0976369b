package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/benbjohnson/immutable"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Snapshot format: an 8-byte magic, then a stream of varint-length-delimited
// SnapshotRecord messages: one header, then every record of every subsystem
// in a fixed order (leadership, allocator, members by ID, request IDs in
// recording order). Records are streamed, never assembled into one value, and
// keys are written sorted, so equal states give equal bytes.
const (
	snapshotMagic         = "COORDSN1"
	snapshotFormatVersion = 1
	maxSnapshotRecord     = 8 << 20
)

var errSnapshot = errors.New("invalid snapshot")

var delimWriter = protodelim.MarshalOptions{MarshalOptions: proto.MarshalOptions{Deterministic: true}}

// WriteSnapshot streams the state to w. It only reads s, so it may run
// concurrently with Apply producing newer states.
func (s *State) WriteSnapshot(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.WriteString(snapshotMagic); err != nil {
		return fmt.Errorf("write snapshot magic: %w", err)
	}
	count := s.RecordCount()
	write := func(r *logpb.SnapshotRecord) error {
		if _, err := delimWriter.MarshalTo(bw, r); err != nil {
			return fmt.Errorf("write snapshot record: %w", err)
		}
		return nil
	}
	records := []*logpb.SnapshotRecord{
		{Record: &logpb.SnapshotRecord_Header{Header: &logpb.SnapshotHeader{
			FormatVersion: snapshotFormatVersion, AppliedIndex: s.applied, RecordCount: count}}},
		{Record: &logpb.SnapshotRecord_Leadership{Leadership: &logpb.LeadershipState{
			EstablishedTerm: s.leader.term, LeaderId: s.leader.leaderID, EstablishedAtUnixMs: s.leader.establishedMs}}},
		{Record: &logpb.SnapshotRecord_Allocator{Allocator: &logpb.AllocatorState{
			TsoLimitPhysicalMs: s.alloc.tsoLimitPhysicalMs, NextId: s.alloc.nextID}}},
		{Record: &logpb.SnapshotRecord_ChannelsMeta{ChannelsMeta: s.ch.meta}},
		{Record: &logpb.SnapshotRecord_BroadcastMeta{BroadcastMeta: s.bc.meta}},
	}
	for _, r := range records {
		if err := write(r); err != nil {
			return err
		}
	}
	for it := s.cluster.members.Iterator(); !it.Done(); {
		_, m, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Member{Member: m}}); err != nil {
			return err
		}
	}
	for it := s.ch.pchannels.Iterator(); !it.Done(); {
		_, p, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Pchannel{Pchannel: p}}); err != nil {
			return err
		}
	}
	for it := s.ch.nodes.Iterator(); !it.Done(); {
		_, n, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_StreamingNode{StreamingNode: n}}); err != nil {
			return err
		}
	}
	for it := s.ch.collections.Iterator(); !it.Done(); {
		_, c, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Collection{Collection: c}}); err != nil {
			return err
		}
	}
	for it := s.bc.tasks.Iterator(); !it.Done(); {
		_, t, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_BroadcastTask{BroadcastTask: t}}); err != nil {
			return err
		}
	}
	if err := s.writeSegmentRecords(write); err != nil {
		return err
	}
	if err := s.writeManifestRecords(write); err != nil {
		return err
	}
	if err := s.writeTokenRecords(write); err != nil {
		return err
	}
	for it := s.dedup.bySeq.Iterator(); !it.Done(); {
		_, id, _ := it.Next()
		e, _ := s.dedup.byID.Get(id)
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Dedup{Dedup: e}}); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("flush snapshot: %w", err)
	}
	return nil
}

// ReadSnapshot builds a fresh state from a snapshot stream. It never touches
// an existing state: the caller swaps the result in only on success.
func ReadSnapshot(r io.Reader) (*State, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return nil, fmt.Errorf("%w: read magic: %v", errSnapshot, err)
	}
	if string(magic) != snapshotMagic {
		return nil, fmt.Errorf("%w: bad magic %q", errSnapshot, magic)
	}
	// Records are read raw; segments (most of a large snapshot) are decoded
	// straight into their compact form (segment_codec.go), the rest by the
	// generated code.
	var scratch []byte
	var pendingSegment *Segment
	read := func() (*logpb.SnapshotRecord, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, err
		}
		if n > maxSnapshotRecord {
			return nil, fmt.Errorf("record of %d bytes (max %d)", n, maxSnapshotRecord)
		}
		if uint64(cap(scratch)) < n {
			scratch = make([]byte, n)
		}
		raw := scratch[:n]
		if _, err := io.ReadFull(br, raw); err != nil {
			return nil, fmt.Errorf("read %d-byte record: %w", n, io.ErrUnexpectedEOF)
		}
		if payload, ok := segmentPayload(raw); ok {
			g, err := decodeSegment(payload)
			if err != nil {
				return nil, err
			}
			pendingSegment = g
			return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Segment{}}, nil
		}
		var rec logpb.SnapshotRecord
		if err := proto.Unmarshal(raw, &rec); err != nil {
			return nil, err
		}
		return &rec, nil
	}
	first, err := read()
	if err != nil {
		return nil, fmt.Errorf("%w: read header: %v", errSnapshot, err)
	}
	hdr := first.GetHeader()
	if hdr == nil || hdr.FormatVersion != snapshotFormatVersion {
		return nil, fmt.Errorf("%w: missing header or unsupported format version", errSnapshot)
	}
	s := New()
	s.applied = hdr.AppliedIndex
	members := immutable.NewSortedMapBuilder[string, *logpb.Member](nil)
	segs := newSegmentRestorer()
	for i := uint64(0); i < hdr.RecordCount; i++ {
		rec, err := read()
		if err != nil {
			return nil, fmt.Errorf("%w: record %d of %d: %v", errSnapshot, i+1, hdr.RecordCount, err)
		}
		switch v := rec.Record.(type) {
		case *logpb.SnapshotRecord_Leadership:
			s.leader = leadershipState{term: v.Leadership.EstablishedTerm, leaderID: v.Leadership.LeaderId,
				establishedMs: v.Leadership.EstablishedAtUnixMs}
		case *logpb.SnapshotRecord_Allocator:
			s.alloc = allocState{tsoLimitPhysicalMs: v.Allocator.TsoLimitPhysicalMs, nextID: v.Allocator.NextId}
		case *logpb.SnapshotRecord_Member:
			members.Set(v.Member.Id, v.Member)
		case *logpb.SnapshotRecord_ChannelsMeta:
			s.ch.meta = v.ChannelsMeta
		case *logpb.SnapshotRecord_Pchannel:
			s.ch.pchannels = s.ch.pchannels.Set(v.Pchannel.Name, v.Pchannel)
		case *logpb.SnapshotRecord_StreamingNode:
			s.ch.nodes = s.ch.nodes.Set(v.StreamingNode.Id, v.StreamingNode)
		case *logpb.SnapshotRecord_Collection:
			s.ch.collections = s.ch.collections.Set(v.Collection.CollectionId, v.Collection)
			for _, vc := range v.Collection.Vchannels {
				p := vocab.PChannelOf(vc)
				s.ch.vcount = s.ch.vcount.Set(p, s.VChannelCount(p)+1)
			}
		case *logpb.SnapshotRecord_BroadcastMeta:
			s.bc.meta = v.BroadcastMeta
		case *logpb.SnapshotRecord_BroadcastTask:
			s.bc.put(v.BroadcastTask)
		case *logpb.SnapshotRecord_Segment:
			if err := segs.addSegmentRecord(s, pendingSegment); err != nil {
				return nil, fmt.Errorf("%w: record %d: %v", errSnapshot, i+1, err)
			}
		case *logpb.SnapshotRecord_ChannelCheckpoint:
			segs.addCheckpoint(s, v.ChannelCheckpoint)
		case *logpb.SnapshotRecord_SegmentIndex:
			if err := s.restoreSegmentIndex(v.SegmentIndex); err != nil {
				return nil, fmt.Errorf("%w: record %d: %v", errSnapshot, i+1, err)
			}
		case *logpb.SnapshotRecord_SegmentStats:
			if err := s.restoreSegmentStats(v.SegmentStats); err != nil {
				return nil, fmt.Errorf("%w: record %d: %v", errSnapshot, i+1, err)
			}
		case *logpb.SnapshotRecord_Dedup:
			s.dedup = s.dedup.record(v.Dedup)
		default:
			if ok, err := s.readRetiredRecord(rec); ok {
				if err != nil {
					return nil, fmt.Errorf("%w: record %d: %v", errSnapshot, i+1, err)
				}
				continue
			}
			if !s.readTokenRecord(rec) {
				return nil, fmt.Errorf("%w: record %d has unexpected kind %T", errSnapshot, i+1, rec.Record)
			}
		}
	}
	if _, err := read(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: trailing data after %d records", errSnapshot, hdr.RecordCount)
	}
	s.cluster.members = members.Map()
	segs.install(s)
	s.rebuildForeignIndex()
	if err := s.CheckInvariants(); err != nil {
		return nil, fmt.Errorf("%w: %v", errSnapshot, err)
	}
	return s, nil
}
