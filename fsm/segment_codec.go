package fsm

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/coordd/coordd/commands/logpb"
)

// Segments dominate a large snapshot, so restore decodes SegmentRecord
// bytes straight into the compact record instead of through the generated
// message (half the allocations). The wire format is the generated one;
// TestSegmentCodecMatchesGenerated checks the two decoders agree.

// snapshotSegmentTag is the SnapshotRecord field tag of a SegmentRecord.
var snapshotSegmentTag = protowire.AppendTag(nil, 12, protowire.BytesType)

var errWire = errors.New("malformed segment record")

type wireReader struct {
	b   []byte
	err error
}

func (r *wireReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errWire, fmt.Sprintf(format, args...))
	}
	r.b = nil
}

func (r *wireReader) tag() (protowire.Number, protowire.Type, bool) {
	if len(r.b) == 0 || r.err != nil {
		return 0, 0, false
	}
	num, typ, n := protowire.ConsumeTag(r.b)
	if n < 0 {
		r.fail("bad tag")
		return 0, 0, false
	}
	r.b = r.b[n:]
	return num, typ, true
}

func (r *wireReader) varint(typ protowire.Type) uint64 {
	if typ != protowire.VarintType {
		r.fail("want a varint, got wire type %d", typ)
		return 0
	}
	v, n := protowire.ConsumeVarint(r.b)
	if n < 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) bytes(typ protowire.Type) []byte {
	if typ != protowire.BytesType {
		r.fail("want bytes, got wire type %d", typ)
		return nil
	}
	v, n := protowire.ConsumeBytes(r.b)
	if n < 0 {
		r.fail("bad length-delimited field")
		return nil
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) skip(num protowire.Number, typ protowire.Type) {
	n := protowire.ConsumeFieldValue(num, typ, r.b)
	if n < 0 {
		r.fail("bad field %d", num)
		return
	}
	r.b = r.b[n:]
}

func decodePosition(b []byte) (Position, error) {
	r := &wireReader{b: b}
	var p Position
	for num, typ, ok := r.tag(); ok; num, typ, ok = r.tag() {
		switch num {
		case 1:
			p.Term = int64(r.varint(typ))
		case 2:
			p.Offset = r.varint(typ)
		case 3:
			p.Timestamp = r.varint(typ)
		default:
			r.skip(num, typ)
		}
	}
	return p, r.err
}

func decodeLogRef(b []byte) (LogRef, error) {
	r := &wireReader{b: b}
	var l LogRef
	for num, typ, ok := r.tag(); ok; num, typ, ok = r.tag() {
		switch num {
		case 1:
			l.LogID = int64(r.varint(typ))
		case 2:
			l.Entries = int64(r.varint(typ))
		case 3:
			l.TsFrom = r.varint(typ)
		case 4:
			l.TsTo = r.varint(typ)
		case 5:
			l.MemorySize = int64(r.varint(typ))
		default:
			r.skip(num, typ)
		}
	}
	return l, r.err
}

func decodeFieldLogs(b []byte) (FieldLogs, error) {
	r := &wireReader{b: b}
	var f FieldLogs
	for num, typ, ok := r.tag(); ok; num, typ, ok = r.tag() {
		switch num {
		case 1:
			f.FieldID = int64(r.varint(typ))
		case 2:
			l, err := decodeLogRef(r.bytes(typ))
			if err != nil {
				return f, err
			}
			f.Logs = append(f.Logs, l)
		default:
			r.skip(num, typ)
		}
	}
	return f, r.err
}

// decodeSegment decodes SegmentRecord bytes into a compact record, as
// segmentOf(proto.Unmarshal(b)) would.
func decodeSegment(b []byte) (*Segment, error) {
	r := &wireReader{b: b}
	g := &Segment{}
	var err error
	for num, typ, ok := r.tag(); ok && err == nil; num, typ, ok = r.tag() {
		switch num {
		case 1:
			g.ID = int64(r.varint(typ))
		case 2:
			g.CollectionID = int64(r.varint(typ))
		case 3:
			g.PartitionID = int64(r.varint(typ))
		case 4:
			g.VChannel = string(r.bytes(typ))
		case 5:
			g.Level = logpb.SegmentLevel(int32(r.varint(typ)))
		case 6:
			g.State = logpb.SegmentState(int32(r.varint(typ)))
		case 7:
			g.NumRows = int64(r.varint(typ))
		case 8:
			g.Size = int64(r.varint(typ))
		case 9:
			g.Start, err = decodePosition(r.bytes(typ))
		case 10:
			g.DML, err = decodePosition(r.bytes(typ))
		case 11:
			g.SealTs = r.varint(typ)
		case 12:
			g.SealReason = logpb.SealReason(int32(r.varint(typ)))
		case 13:
			g.StorageVersion = uint32(r.varint(typ))
		case 14:
			g.ManifestPath = string(r.bytes(typ))
		case 15:
			g.CreatedMs = int64(r.varint(typ))
		case 16:
			g.DroppedMs = int64(r.varint(typ))
		case 17, 18:
			var f FieldLogs
			f, err = decodeFieldLogs(r.bytes(typ))
			if num == 17 {
				g.Binlogs = append(g.Binlogs, f)
			} else {
				g.Statslogs = append(g.Statslogs, f)
			}
		case 19:
			var l LogRef
			l, err = decodeLogRef(r.bytes(typ))
			g.Deltalogs = append(g.Deltalogs, l)
		case 20:
			g.SealedMs = int64(r.varint(typ))
		case 21:
			g.LastWriteMs = int64(r.varint(typ))
		default:
			r.skip(num, typ)
		}
	}
	if err != nil {
		return nil, err
	}
	return g, r.err
}

// segmentPayload returns the SegmentRecord bytes when raw (one snapshot
// record) holds a segment and nothing else.
func segmentPayload(raw []byte) ([]byte, bool) {
	if len(raw) < len(snapshotSegmentTag) || string(raw[:len(snapshotSegmentTag)]) != string(snapshotSegmentTag) {
		return nil, false
	}
	v, n := protowire.ConsumeBytes(raw[len(snapshotSegmentTag):])
	if n < 0 || len(snapshotSegmentTag)+n != len(raw) {
		return nil, false
	}
	return v, true
}
