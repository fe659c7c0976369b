// Package dml is the encoding of data-manipulation messages in the
// reference streaming node's WAL. The WAL stores opaque payloads; a payload
// that starts with the DML magic is a DML message and only the streaming
// node's write path (StreamingNodeService.Insert) writes such payloads.
//
// Insert message, version 1 (integers little-endian; varints as in
// encoding/binary):
//
//	magic        4 bytes  "CDML"
//	kind         1 byte   1 = insert
//	version      1 byte   1
//	collection   8 bytes  int64
//	partition    8 bytes  int64
//	segment      8 bytes  int64, the growing segment coordd assigned the rows to
//	rows         uvarint  n (1..MaxRows)
//	pks          n varints: the first primary key, then each minus the one before
//	crc          4 bytes  CRC-32C (Castagnoli) of every byte before it
//
// Every row of an insert message has the WAL record's timestamp.
package dml

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Kinds.
const (
	KindInsert = 1
)

// MaxRows bounds the rows of one insert message.
const MaxRows = 1 << 20

const (
	magic      = "CDML"
	version    = 1
	headerSize = 4 + 1 + 1 + 3*8
	crcSize    = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt: a payload with the DML magic that is not a valid message.
var ErrCorrupt = errors.New("dml: corrupt message")

// Insert is one insert message: rows for one segment of one VChannel (the
// VChannel is the WAL record's).
type Insert struct {
	Collection int64
	Partition  int64
	Segment    int64
	PKs        []int64
}

// IsDML reports whether a WAL payload is a DML message (of any kind or
// version, valid or not).
func IsDML(payload []byte) bool {
	return len(payload) >= 4 && string(payload[:4]) == magic
}

// EncodeInsert returns the payload of m (one allocation of its exact size).
func EncodeInsert(m *Insert) ([]byte, error) {
	if len(m.PKs) == 0 || len(m.PKs) > MaxRows {
		return nil, fmt.Errorf("dml: an insert needs 1..%d rows, got %d", MaxRows, len(m.PKs))
	}
	return AppendInsert(make([]byte, 0, EncodedSize(m)), m)
}

// EncodedSize is the length of m's payload.
func EncodedSize(m *Insert) int {
	n := headerSize + uvarintLen(uint64(len(m.PKs))) + crcSize
	var prev int64
	for _, pk := range m.PKs {
		d := pk - prev
		n += uvarintLen(uint64(d<<1) ^ uint64(d>>63)) // zig-zag, as binary.AppendVarint
		prev = pk
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// AppendInsert appends m's payload to buf and returns the extended
// buffer, so a caller can reuse one buffer for many messages (it must not
// reuse it while the payload is still in use).
func AppendInsert(buf []byte, m *Insert) ([]byte, error) {
	if len(m.PKs) == 0 || len(m.PKs) > MaxRows {
		return nil, fmt.Errorf("dml: an insert needs 1..%d rows, got %d", MaxRows, len(m.PKs))
	}
	start := len(buf)
	buf = append(buf, magic...)
	buf = append(buf, KindInsert, version)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(m.Collection))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(m.Partition))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(m.Segment))
	buf = binary.AppendUvarint(buf, uint64(len(m.PKs)))
	var prev int64
	for _, pk := range m.PKs {
		buf = binary.AppendVarint(buf, pk-prev)
		prev = pk
	}
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf[start:], crcTable)), nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// DecodeInsert parses an insert payload.
func DecodeInsert(p []byte) (*Insert, error) {
	m := &Insert{}
	if err := DecodeInsertInto(p, m); err != nil {
		return nil, err
	}
	return m, nil
}

// DecodeInsertInto parses an insert payload into m, reusing the capacity
// of m.PKs (a consumer decoding message after message allocates only when
// a message has more rows than any before). On error m is unspecified.
func DecodeInsertInto(p []byte, m *Insert) error {
	if !IsDML(p) {
		return corrupt("not a DML message")
	}
	if len(p) < headerSize+1+crcSize {
		return corrupt("%d bytes is too short", len(p))
	}
	if p[4] != KindInsert {
		return corrupt("kind %d is not an insert", p[4])
	}
	if p[5] != version {
		return corrupt("unsupported version %d", p[5])
	}
	body := p[:len(p)-crcSize]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(p[len(body):]) {
		return corrupt("checksum mismatch")
	}
	m.Collection = int64(binary.LittleEndian.Uint64(body[6:]))
	m.Partition = int64(binary.LittleEndian.Uint64(body[14:]))
	m.Segment = int64(binary.LittleEndian.Uint64(body[22:]))
	b := body[headerSize:]
	n, k := binary.Uvarint(b)
	if k <= 0 || (k > 1 && b[k-1] == 0) {
		return corrupt("bad row count")
	}
	b = b[k:]
	if n == 0 || n > MaxRows || n > uint64(len(b)) {
		return corrupt("row count %d does not fit", n)
	}
	if uint64(cap(m.PKs)) >= n {
		m.PKs = m.PKs[:n]
	} else {
		m.PKs = make([]int64, n)
	}
	var pk int64
	for i := range m.PKs {
		d, k := binary.Varint(b)
		if k <= 0 || (k > 1 && b[k-1] == 0) {
			return corrupt("pk %d: bad varint", i)
		}
		pk += d
		m.PKs[i] = pk
		b = b[k:]
	}
	if len(b) != 0 {
		return corrupt("%d trailing bytes", len(b))
	}
	return nil
}
