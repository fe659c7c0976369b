// Package binlog is the format of the insert binlogs the reference
// streaming node's flusher writes to the object store: one object per
// segment flush, holding every row's primary key and timestamp.
//
// Object key (as coordd derives it from the log ID it stores):
//
//	insert_log/<collection>/<partition>/<segment>/<field>/<log_id>
//
// The reference flusher writes one object per flush under the primary-key
// field (PKFieldID); the object carries each row's timestamp as a second
// column.
//
// Encoding, version 1 (integers little-endian; "uvarint" and "varint" are
// encoding/binary's unsigned and zig-zag signed varints):
//
//	magic        4 bytes  "CDBL"
//	version      1 byte   1
//	flags        1 byte   0 (reserved)
//	collection   8 bytes  int64
//	partition    8 bytes  int64
//	segment      8 bytes  int64
//	field        8 bytes  int64
//	log ID       8 bytes  int64
//	rows         uvarint  row count n
//	pk column    n varints: the first pk, then each pk minus the one before
//	ts column    n varints: the first timestamp, then each minus the one before
//	crc          4 bytes  CRC-32C (Castagnoli) of every byte before it
//
// The encoding is canonical: a decoded object encodes to the same bytes.
package binlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// Version is the encoding version this package writes.
const Version = 1

// PKFieldID is the field the reference flusher files its binlogs under (the
// first user field ID in Milvus schemas, the primary key).
const PKFieldID = 100

// MaxRows bounds the rows of one object.
const MaxRows = 1 << 26

const (
	magic      = "CDBL"
	headerSize = 4 + 1 + 1 + 5*8
	crcSize    = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt: bytes that are not a valid binlog object.
var ErrCorrupt = errors.New("binlog: corrupt")

// ErrInvalidPath: a key that is not an insert binlog key.
var ErrInvalidPath = errors.New("binlog: invalid path")

// Row is one inserted row as persisted.
type Row struct {
	PK int64  `json:"pk"`
	TS uint64 `json:"ts"`
}

// ID names one binlog object.
type ID struct {
	Collection, Partition, Segment, Field, LogID int64
}

// Path is the object key of id.
func (id ID) Path() string {
	return fmt.Sprintf("insert_log/%d/%d/%d/%d/%d", id.Collection, id.Partition, id.Segment, id.Field, id.LogID)
}

// ParsePath parses an insert binlog key (Path's inverse).
func ParsePath(path string) (ID, error) {
	parts := strings.Split(path, "/")
	if len(parts) != 6 || parts[0] != "insert_log" {
		return ID{}, fmt.Errorf("%w: %q: want insert_log/<collection>/<partition>/<segment>/<field>/<log_id>", ErrInvalidPath, path)
	}
	var v [5]int64
	for i, p := range parts[1:] {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != p {
			return ID{}, fmt.Errorf("%w: %q: %q is not a decimal integer", ErrInvalidPath, path, p)
		}
		v[i] = n
	}
	return ID{Collection: v[0], Partition: v[1], Segment: v[2], Field: v[3], LogID: v[4]}, nil
}

// Object is a decoded binlog object.
type Object struct {
	ID   ID
	Rows []Row
}

// TimestampRange returns the smallest and largest row timestamp (0, 0
// without rows).
func (o *Object) TimestampRange() (from, to uint64) {
	for i, r := range o.Rows {
		if i == 0 || r.TS < from {
			from = r.TS
		}
		if r.TS > to {
			to = r.TS
		}
	}
	return from, to
}

// Encode returns the object's bytes.
func Encode(o *Object) ([]byte, error) {
	if len(o.Rows) > MaxRows {
		return nil, fmt.Errorf("binlog: %d rows (max %d)", len(o.Rows), MaxRows)
	}
	buf := make([]byte, 0, headerSize+binary.MaxVarintLen64*(1+2*len(o.Rows))/3+crcSize)
	buf = append(buf, magic...)
	buf = append(buf, Version, 0)
	for _, v := range []int64{o.ID.Collection, o.ID.Partition, o.ID.Segment, o.ID.Field, o.ID.LogID} {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	}
	buf = binary.AppendUvarint(buf, uint64(len(o.Rows)))
	var prevPK int64
	for _, r := range o.Rows {
		buf = binary.AppendVarint(buf, r.PK-prevPK) // wraps like the decoder's addition
		prevPK = r.PK
	}
	var prevTS uint64
	for _, r := range o.Rows {
		buf = binary.AppendVarint(buf, int64(r.TS-prevTS))
		prevTS = r.TS
	}
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, crcTable)), nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Decode parses an object. It never allocates more than a small multiple
// of len(data).
func Decode(data []byte) (*Object, error) {
	if len(data) < headerSize+1+crcSize {
		return nil, corrupt("%d bytes is shorter than the smallest object", len(data))
	}
	if string(data[:4]) != magic {
		return nil, corrupt("bad magic %q", data[:4])
	}
	if data[4] != Version {
		return nil, corrupt("unsupported version %d (this reader knows %d)", data[4], Version)
	}
	if data[5] != 0 {
		return nil, corrupt("unknown flags %#x", data[5])
	}
	body := data[:len(data)-crcSize]
	if got, want := crc32.Checksum(body, crcTable), binary.LittleEndian.Uint32(data[len(body):]); got != want {
		return nil, corrupt("checksum %08x, stored %08x", got, want)
	}
	var v [5]int64
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(body[6+8*i:]))
	}
	o := &Object{ID: ID{Collection: v[0], Partition: v[1], Segment: v[2], Field: v[3], LogID: v[4]}}
	p := body[headerSize:]
	n, k := binary.Uvarint(p)
	if k <= 0 || (k > 1 && p[k-1] == 0) {
		return nil, corrupt("bad row count")
	}
	p = p[k:]
	// Every row takes at least two bytes.
	if n > MaxRows || n > uint64(len(p))/2 {
		return nil, corrupt("row count %d does not fit in %d bytes", n, len(p))
	}
	o.Rows = make([]Row, n)
	var pk int64
	for i := range o.Rows {
		d, k := varint(p)
		if k <= 0 {
			return nil, corrupt("pk %d: bad varint", i)
		}
		pk += d
		o.Rows[i].PK = pk
		p = p[k:]
	}
	var ts uint64
	for i := range o.Rows {
		d, k := varint(p)
		if k <= 0 {
			return nil, corrupt("ts %d: bad varint", i)
		}
		ts += uint64(d)
		o.Rows[i].TS = ts
		p = p[k:]
	}
	if len(p) != 0 {
		return nil, corrupt("%d trailing bytes", len(p))
	}
	return o, nil
}

// varint is binary.Varint that also refuses non-minimal encodings, so
// every object has exactly one encoding.
func varint(p []byte) (int64, int) {
	v, k := binary.Varint(p)
	if k > 1 && p[k-1] == 0 {
		return 0, -1
	}
	return v, k
}
